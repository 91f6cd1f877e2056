"""Reads mail over IMAP, read-only: a mailbox is opened with EXAMINE and messages are fetched
with BODY.PEEK, so nothing is marked read, moved or deleted."""

from __future__ import annotations

import base64
import imaplib
import re
import socket
import ssl
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default

from orchestrator.tools import ToolError

from .email_settings import EmailSettings

_FLAGS = re.compile(rb"FLAGS \(([^)]*)\)")
_UID = re.compile(rb"UID (\d+)")
_LISTED = re.compile(rb'\([^)]*\) (?:"[^"]*"|NIL) (.+)')  # (flags) "delimiter" name


@dataclass(frozen=True)
class Fetched:
    """One message as the server returned it: its UID, flags and (part of) its bytes."""

    uid: int
    seen: bool
    message: EmailMessage


@contextmanager
def mailbox_open(settings: EmailSettings, mailbox: str) -> Iterator[imaplib.IMAP4]:
    """A logged-in connection with `mailbox` opened read-only (EXAMINE); ToolErrors in the
    documented codes for what fails, here or in the `with` block."""
    host = _host(settings)
    with _failures(settings, host):
        client = _connect(settings, host)
        try:
            _login(client, settings, host)
            _examine(client, mailbox)
            yield client
        finally:
            with suppress(imaplib.IMAP4.error, OSError):
                client.logout()


def search_uids(client: imaplib.IMAP4, criteria: list[str | bytes]) -> list[int]:
    """The UIDs of the messages matching `criteria` (IMAP SEARCH keys), oldest first.

    A bytes criterion is sent as a literal in UTF-8 (it must be the last)."""
    words = [c for c in criteria if isinstance(c, str)]
    literal = next((c for c in criteria if isinstance(c, bytes)), None)
    if literal is not None:
        client.literal = literal  # pyright: ignore[reportAttributeAccessIssue]  # imaplib reads it: its documented way to send a literal
        words = ["CHARSET", "UTF-8", *words]
    _, data = _ok(client.uid("SEARCH", *(words or ["ALL"])))
    found = data[0] if data and isinstance(data[0], bytes) else b""
    return sorted(int(uid) for uid in found.split())


def fetch(client: imaplib.IMAP4, uids: list[int], *, headers_only: bool) -> list[Fetched]:
    """The messages `uids` (those that exist), with their headers only or whole."""
    if not uids:
        return []
    part = "BODY.PEEK[HEADER]" if headers_only else "BODY.PEEK[]"
    _, data = _ok(client.uid("FETCH", ",".join(map(str, uids)), f"(UID FLAGS {part})"))
    parser = BytesParser(policy=default)
    found: list[Fetched] = []
    for index, item in enumerate(data):
        if not isinstance(item, tuple) or len(item) != 2:
            continue  # the closing b")" of each message: its FLAGS when sent after the body
        envelope, content = item
        after = data[index + 1] if index + 1 < len(data) else b""
        if not isinstance(envelope, bytes) or not isinstance(content, bytes):
            continue
        around = envelope + (after if isinstance(after, bytes) else b"")
        uid, flags = _UID.search(around), _FLAGS.search(around)
        if uid is None:
            continue
        seen = flags is not None and b"\\Seen" in flags.group(1).split()
        found.append(Fetched(int(uid.group(1)), seen, parser.parsebytes(content)))
    return found


def mailboxes(client: imaplib.IMAP4) -> list[str]:
    """The names of the account's mailboxes."""
    _, data = _ok(client.list())
    lines = (_LISTED.match(line) for line in data if isinstance(line, bytes))
    return [
        _from_utf7(m.group(1).decode(errors="replace").strip('"')) for m in lines if m is not None
    ]


def _to_utf7(name: str) -> str:
    """A mailbox name in IMAP's modified UTF-7 (RFC 3501 5.1.3): `Entwürfe` is `Entw&APw-rfe`."""
    out: list[str] = []
    wide: list[str] = []
    for char in [*name, ""]:
        if char and not " " <= char <= "~":
            wide.append(char)
            continue
        if wide:
            encoded = base64.b64encode("".join(wide).encode("utf-16-be")).rstrip(b"=")
            out.append("&" + encoded.decode().replace("/", ",") + "-")
            wide = []
        out.append("&-" if char == "&" else char)
    return "".join(out)


def _from_utf7(name: str) -> str:
    def wide(match: re.Match[str]) -> str:
        encoded = match.group(1).replace(",", "/")
        return (
            base64.b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-16-be")
            if encoded
            else "&"
        )

    return re.sub(r"&([A-Za-z0-9+,]*)-", wide, name)


def quoted(text: str) -> str:
    """`text` as an IMAP quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _host(settings: EmailSettings) -> str:
    if not settings.imap_host:
        raise ToolError(
            f"Reading mail needs the IMAP server: {settings.how_to_set_these('imap_host')}",
            code="not_configured",
            recoverable=False,
        )
    return settings.imap_host


def _connect(settings: EmailSettings, host: str) -> imaplib.IMAP4:
    port, timeout = settings.imap_port, settings.timeout_seconds
    if settings.imap_security == "ssl":
        context = ssl.create_default_context()
        return imaplib.IMAP4_SSL(host, port, ssl_context=context, timeout=timeout)
    client = imaplib.IMAP4(host, port, timeout=timeout)
    if settings.imap_security == "starttls":
        if "STARTTLS" not in client.capabilities:
            client.shutdown()
            raise ToolError(
                f"{host}:{port} does not offer STARTTLS, which imap_security=starttls needs. "
                "For implicit TLS (usually port 993) set imap_security: ssl; for a server on "
                f"this machine without TLS, imap_security: none ({settings.how_to_set_these('imap_security')})",
                code="not_configured",
                recoverable=False,
            )
        client.starttls(ssl_context=ssl.create_default_context())
    return client


def _login(client: imaplib.IMAP4, settings: EmailSettings, host: str) -> None:
    user = settings.imap_username or settings.smtp_username
    password = settings.imap_password or settings.smtp_password
    if not user or password is None:
        raise ToolError(
            "Reading mail needs the IMAP login: "
            f"{settings.how_to_set_these('imap_username', 'imap_password')}",
            code="not_configured",
            recoverable=False,
        )
    try:
        client.login(user, password.get_secret_value())
    except imaplib.IMAP4.abort:
        raise
    except imaplib.IMAP4.error as error:
        raise ToolError(
            f"{host}:{settings.imap_port} refused the login of {user!r}: {_said(error)} "
            "(check EMAIL_AGENT_IMAP_USERNAME and EMAIL_AGENT_IMAP_PASSWORD)",
            code="bad_credentials",
            recoverable=False,
        ) from None


def _examine(client: imaplib.IMAP4, mailbox: str) -> None:
    status, _ = client.select(quoted(_to_utf7(mailbox)), readonly=True)
    if status != "OK":
        raise ToolError(
            f"There is no mailbox {mailbox!r}; the account has {', '.join(mailboxes(client))}",
            code="not_found",
            recoverable=False,
        )


def _ok(reply: tuple[str, Sequence[object]]) -> tuple[str, Sequence[object]]:
    status, data = reply
    if status != "OK":
        said = b" ".join(d for d in data if isinstance(d, bytes)).decode(errors="replace")
        raise imaplib.IMAP4.error(said or status)
    return status, data


@contextmanager
def _failures(settings: EmailSettings, host: str) -> Iterator[None]:
    where = f"{host}:{settings.imap_port}"
    try:
        yield
    except imaplib.IMAP4.abort as error:
        raise _unreachable(where, f"the connection was dropped ({_said(error)})") from None
    except imaplib.IMAP4.error as error:
        raise ToolError(f"{where} refused the request: {_said(error)}", code="imap_error") from None
    except ssl.SSLError as error:
        raise ToolError(
            f"TLS with {where} failed ({error.reason or error}): check imap_security "
            "(ssl, usually port 993; starttls, usually 143; none, a server on this machine)",
            code="not_configured",
            recoverable=False,
        ) from None
    except socket.gaierror as error:
        raise _unreachable(where, f"no such host ({error.strerror})") from None
    except TimeoutError:
        raise _unreachable(
            where, f"no answer within {settings.timeout_seconds:g} s (timeout_seconds)"
        ) from None
    except OSError as error:
        raise _unreachable(where, error.strerror or type(error).__name__) from None


def _unreachable(where: str, reason: str) -> ToolError:
    return ToolError(
        f"Could not reach the IMAP server {where}: {reason}", code="server_unreachable"
    )


def _said(error: Exception) -> str:
    text = str(error)
    # imaplib words the server's reply as the repr of its bytes: b'[AUTHENTICATIONFAILED] ...'
    if text.startswith(("b'", 'b"')) and text.endswith(text[1]):
        text = text[2:-1]
    return text
