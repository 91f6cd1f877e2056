"""An aiosmtpd SMTP server on 127.0.0.1 with AUTH (`assistant`, `s3cret`) that keeps what it
receives and refuses what a test tells it to, with the reply a real server gives."""

from __future__ import annotations

from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from types import TracebackType

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.integrations.folders import free_port

USER, PASSWORD = "assistant", "s3cret"


class SmtpServer:
    """Started on entering; `refuse_recipients`, `refuse_senders` and `data_reply` set what it refuses."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self.logins: list[str] = []
        self.refuse_recipients: set[str] = set()
        self.refuse_senders: set[str] = set()
        self.data_reply = "250 Message accepted"
        self.port = free_port()
        self._controller = Controller(
            self,
            hostname="127.0.0.1",
            port=self.port,
            authenticator=self._authenticate,
            auth_require_tls=False,
        )

    def __enter__(self) -> SmtpServer:
        self._controller.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._controller.stop()

    @property
    def received(self) -> list[EmailMessage]:
        """The messages it took, parsed."""
        parser = BytesParser(policy=default)
        return [parser.parsebytes(envelope.original_content or b"") for envelope in self.envelopes]

    async def handle_MAIL(  # noqa: N802  (aiosmtpd's hook name)
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if address in self.refuse_senders:
            return "553 5.7.1 Sender address rejected: not owned by user"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(  # noqa: N802
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if address in self.refuse_recipients:
            return "550 5.1.1 User unknown"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:  # noqa: N802
        if self.data_reply.startswith("250"):
            self.envelopes.append(envelope)
        return self.data_reply

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, auth_data: object
    ) -> AuthResult:
        if isinstance(auth_data, LoginPassword) and auth_data.password == PASSWORD.encode():
            self.logins.append(auth_data.login.decode())
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)
