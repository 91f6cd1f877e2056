"""Hands a message to the SMTP server, and says in the documented codes why it did not go."""

from __future__ import annotations

import smtplib
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage

from orchestrator.tools import ToolError

from .email_settings import EmailSettings

Refusals = dict[str, tuple[int, bytes]]


def deliver(smtp: EmailSettings, message: EmailMessage, recipients: list[str]) -> Refusals:
    """Send `message` to `recipients` (the envelope: Bcc is in no header); those the server
    refused, when it took the others. Raises ToolError (see `failures`)."""
    with failures(smtp), _connect(smtp) as client:
        _secure(client, smtp)
        if smtp.smtp_username and smtp.smtp_password:
            client.login(smtp.smtp_username, smtp.smtp_password.get_secret_value())
        return client.send_message(message, to_addrs=recipients)


def _connect(smtp: EmailSettings) -> smtplib.SMTP:
    where = (smtp.smtp_host, smtp.smtp_port)
    if smtp.security == "ssl":
        context = ssl.create_default_context()
        return smtplib.SMTP_SSL(*where, timeout=smtp.timeout_seconds, context=context)
    return smtplib.SMTP(*where, timeout=smtp.timeout_seconds)


def _secure(client: smtplib.SMTP, smtp: EmailSettings) -> None:
    if smtp.security != "starttls":
        return
    client.ehlo()
    if not client.has_extn("starttls"):
        raise ToolError(
            f"{smtp.where} does not offer STARTTLS, which security=starttls (the default) needs. "
            "For a relay on this machine without TLS, "
            f"{smtp.how_to_set_these('security')} (security: none); "
            "for implicit TLS (usually port 465), security: ssl",
            code="not_configured",
            recoverable=False,
        )
    client.starttls(context=ssl.create_default_context())


def refused_error(refusals: Refusals, *, sent_to: list[str]) -> ToolError:
    """The error for recipients the server refused; `sent_to`, those it took (the email went
    to them, so another try would send it twice)."""
    refused = "; ".join(
        f"{address} ({_reply(code, text)})" for address, (code, text) in refusals.items()
    )
    went = f"It was sent to {', '.join(sent_to)} only" if sent_to else "It was sent to no one"
    return ToolError(f"The server refused {refused}. {went}.", code="refused", recoverable=False)


@contextmanager
def failures(smtp: EmailSettings) -> Iterator[None]:
    """smtplib's and the socket's errors as the documented codes."""
    try:
        yield
    except smtplib.SMTPAuthenticationError as error:
        raise ToolError(
            f"{smtp.where} refused the login of {smtp.smtp_username!r}: "
            f"{_reply(error.smtp_code, error.smtp_error)} "
            "(check EMAIL_AGENT_SMTP_USERNAME and EMAIL_AGENT_SMTP_PASSWORD)",
            code="bad_credentials",
            recoverable=False,
        ) from None
    except smtplib.SMTPRecipientsRefused as error:
        raise refused_error(error.recipients, sent_to=[]) from None
    except smtplib.SMTPSenderRefused as error:
        raise ToolError(
            f"{smtp.where} refused the sender {error.sender}: {_reply(error.smtp_code, error.smtp_error)}",
            code="refused",
            recoverable=False,
        ) from None
    except smtplib.SMTPNotSupportedError as error:
        raise ToolError(
            f"{smtp.where} does not support what the settings ask: {error}",
            code="not_configured",
            recoverable=False,
        ) from None
    except (smtplib.SMTPConnectError, smtplib.SMTPServerDisconnected) as error:
        # smtplib words a reply that never came as a closed connection; the timeout is the cause
        if isinstance(error.__context__, TimeoutError):
            raise _unreachable(smtp, _no_answer(smtp)) from None
        raise _unreachable(smtp, str(error) or "the connection closed") from None
    except smtplib.SMTPResponseException as error:
        # 4xx: the server asks to try later; 5xx: it will not take the message as it is
        raise ToolError(
            f"{smtp.where} did not take the email: {_reply(error.smtp_code, error.smtp_error)}",
            code="smtp_error" if error.smtp_code < 500 else "refused",
            recoverable=error.smtp_code < 500,
        ) from None
    except ssl.SSLCertVerificationError as error:
        raise ToolError(
            f"The certificate of {smtp.where} could not be verified: {error.verify_message} "
            "(smtp_host must be the name the certificate is for)",
            code="not_configured",
            recoverable=False,
        ) from None
    except ssl.SSLError as error:
        raise ToolError(
            f"TLS with {smtp.where} failed ({error.reason or error}): check security "
            "(starttls, usually port 587; ssl, usually 465; none, a relay on this machine)",
            code="not_configured",
            recoverable=False,
        ) from None
    except socket.gaierror as error:
        raise _unreachable(smtp, f"no such host ({error.strerror})") from None
    except TimeoutError:
        raise _unreachable(smtp, _no_answer(smtp)) from None
    except smtplib.SMTPException as error:  # before OSError, its base
        raise ToolError(f"{smtp.where} failed: {error}", code="smtp_error") from None
    except OSError as error:
        raise _unreachable(smtp, error.strerror or type(error).__name__) from None


def _unreachable(smtp: EmailSettings, reason: str) -> ToolError:
    return ToolError(
        f"Could not reach the SMTP server {smtp.where}: {reason}", code="server_unreachable"
    )


def _no_answer(smtp: EmailSettings) -> str:
    return f"no answer within {smtp.timeout_seconds:g} s (timeout_seconds)"


def _reply(code: int, text: bytes | str) -> str:
    said = text.decode(errors="replace") if isinstance(text, bytes) else text
    return f"{code} {said}".strip()
