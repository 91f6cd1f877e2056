"""email_agent against an aiosmtpd server on 127.0.0.1 with AUTH: each action, and each
documented error code with whether it is marked retryable."""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import JsonValue

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest, ToolResult
from tests.integrations.folders import free_port
from tests.integrations.smtp_server import PASSWORD, USER, SmtpServer
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "personal_assistant_agent" / "src" / "sub_graphs" / "email_agent"


@pytest.fixture
def smtp(monkeypatch: pytest.MonkeyPatch) -> Iterator[SmtpServer]:
    """The server, the agent pointed at it as at a relay on this machine (security: none)."""
    with SmtpServer() as server:
        point_at(monkeypatch, port=server.port)
        yield server


def point_at(monkeypatch: pytest.MonkeyPatch, *, port: int, **settings: str) -> None:
    for name, value in {
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(port),
        "SECURITY": "none",
        "FROM_ADDRESS": "assistant@example.org",
        "SMTP_USERNAME": USER,
        "SMTP_PASSWORD": PASSWORD,
        **settings,
    }.items():
        monkeypatch.setenv(f"EMAIL_AGENT_{name}", value)


@functools.cache
def agent() -> Tool:
    return load_tool_folder(FOLDER)


async def send(**parameters: JsonValue) -> ToolResult:
    mail = {"to": ["bob@example.com"], "subject": "Hi", "body": "See you at 5."} | parameters
    return await agent().execute(ToolRequest(request_id="r1", action="send", parameters=mail))


async def failure(**parameters: JsonValue) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await send(**parameters)
    return caught.value


# The documented error codes


async def test_a_refused_recipient_is_not_reported_as_sent(smtp: SmtpServer):
    smtp.refuse_recipients = {"nobody@example.com"}

    error = await failure(to=["nobody@example.com"])

    assert (error.code, error.recoverable) == ("refused", False)
    assert "nobody@example.com (550 5.1.1 User unknown)" in str(error)
    assert "It was sent to no one" in str(error)
    assert smtp.envelopes == []


async def test_a_partial_refusal_says_who_got_it_and_who_did_not(smtp: SmtpServer):
    smtp.refuse_recipients = {"nobody@example.com"}

    error = await failure(to=["bob@example.com", "nobody@example.com"], cc=["carol@example.com"])

    # not retryable: another try would send it to bob and carol twice
    assert (error.code, error.recoverable) == ("refused", False)
    assert str(error) == (
        "The server refused nobody@example.com (550 5.1.1 User unknown). "
        "It was sent to bob@example.com, carol@example.com only."
    )
    [envelope] = smtp.envelopes
    assert envelope.rcpt_tos == ["bob@example.com", "carol@example.com"]


async def test_a_refused_sender_is_refused(smtp: SmtpServer):
    smtp.refuse_senders = {"assistant@example.org"}

    error = await failure()

    assert (error.code, error.recoverable) == ("refused", False)
    assert "refused the sender assistant@example.org: 553 5.7.1" in str(error)


async def test_a_message_the_server_rejects_is_refused_and_one_it_defers_is_retryable(
    smtp: SmtpServer,
):
    smtp.data_reply = "554 5.7.1 Message rejected as spam"
    rejected = await failure()
    smtp.data_reply = "451 4.3.0 Try again later"
    deferred = await failure()

    assert (rejected.code, rejected.recoverable) == ("refused", False)
    assert "554 5.7.1 Message rejected as spam" in str(rejected)
    assert (deferred.code, deferred.recoverable) == ("smtp_error", True)
    assert "451 4.3.0 Try again later" in str(deferred)


async def test_a_wrong_password_is_bad_credentials(
    smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_SMTP_PASSWORD", "wrong")

    error = await failure()

    assert (error.code, error.recoverable) == ("bad_credentials", False)
    assert f"refused the login of '{USER}': 535" in str(error)
    assert "EMAIL_AGENT_SMTP_PASSWORD" in str(error) and "wrong" not in str(error)
    assert smtp.envelopes == []


async def test_a_server_that_is_down_is_unreachable_and_retryable(monkeypatch: pytest.MonkeyPatch):
    port = free_port()
    point_at(monkeypatch, port=port)

    error = await failure()

    assert (error.code, error.recoverable) == ("server_unreachable", True)
    assert f"Could not reach the SMTP server 127.0.0.1:{port}: Connection refused" == str(error)


async def test_a_server_that_never_answers_is_unreachable_after_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
):
    with socket.socket() as silent:  # connections queue in its backlog; nothing greets them
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        point_at(monkeypatch, port=silent.getsockname()[1], TIMEOUT_SECONDS="0.2")

        error = await failure()

    assert (error.code, error.recoverable) == ("server_unreachable", True)
    assert str(error).endswith("no answer within 0.2 s (timeout_seconds)")


async def test_a_host_without_an_address_is_unreachable(monkeypatch: pytest.MonkeyPatch):
    point_at(monkeypatch, port=25, SMTP_HOST="mail.example.invalid")

    def no_such_host(*args: object, **kwargs: object) -> object:
        # what the resolver answers for a name that does not exist, without asking a DNS server
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)

    error = await failure()

    assert (error.code, error.recoverable) == ("server_unreachable", True)
    assert str(error) == (
        "Could not reach the SMTP server mail.example.invalid:25: no such host (Name or service not known)"
    )


async def test_the_default_starttls_on_a_relay_without_it_says_to_set_security_none(
    smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("EMAIL_AGENT_SECURITY")  # the default: starttls

    error = await failure()

    assert (error.code, error.recoverable) == ("not_configured", False)
    message = str(error)
    assert f"127.0.0.1:{smtp.port} does not offer STARTTLS" in message
    assert "set EMAIL_AGENT_SECURITY in the environment" in message
    assert "security: none" in message
    assert smtp.envelopes == []


async def test_implicit_tls_on_a_plain_server_says_to_check_security(
    smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_SECURITY", "ssl")

    error = await failure()

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert f"TLS with 127.0.0.1:{smtp.port} failed" in str(error)
    assert "check security" in str(error)


# The actions


async def test_an_html_body_is_sent_beside_the_text(smtp: SmtpServer):
    await send(body="Lunch at noon?", html="<p>Lunch at <b>noon</b>?</p>")

    [received] = smtp.received
    assert received.get_content_type() == "multipart/alternative"
    assert [(part.get_content_type(), part.get_content()) for part in received.iter_parts()] == [
        ("text/plain", "Lunch at noon?\r\n"),
        ("text/html", "<p>Lunch at <b>noon</b>?</p>\r\n"),
    ]


async def test_bcc_recipients_get_it_and_no_one_sees_them(smtp: SmtpServer):
    result = await send(cc=["carol@example.com"], bcc=["boss@example.com"])

    [envelope] = smtp.envelopes
    assert envelope.rcpt_tos == ["bob@example.com", "carol@example.com", "boss@example.com"]
    assert b"boss@example.com" not in (envelope.original_content or b"")
    assert (
        result.message
        == "Email sent to bob@example.com, carol@example.com (bcc: boss@example.com)."
    )
    assert result.data["bcc"] == ["boss@example.com"]  # type: ignore[index]


async def test_reply_to_is_in_the_header(smtp: SmtpServer):
    await send(reply_to=["team@example.com", "ada@example.com"])

    [received] = smtp.received
    assert received["Reply-To"] == "team@example.com, ada@example.com"
    assert received["From"] == "assistant@example.org"


async def test_bcc_and_reply_to_addresses_are_checked_before_sending(smtp: SmtpServer):
    with pytest.raises(ToolError, match="'boss at example' is not an email address"):
        await send(bcc=["boss at example"])
    with pytest.raises(ToolError, match="'me@' is not an email address"):
        await send(reply_to=["me@"])
    assert smtp.envelopes == []


async def test_a_line_break_in_the_subject_is_refused_before_sending(smtp: SmtpServer):
    with pytest.raises(ToolError, match="has a line break") as caught:
        await send(subject="Hi\r\nBcc: eve@example.com")
    assert caught.value.code == "invalid_arguments"
    assert smtp.envelopes == []


@pytest.fixture
def allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "outbox"
    (folder / "reports").mkdir(parents=True)
    monkeypatch.setenv("EMAIL_AGENT_ATTACHMENTS_DIR", str(folder))
    return folder


async def test_attachments_from_the_allowed_folder_are_received(smtp: SmtpServer, allowed: Path):
    pdf = bytes(range(256)) * 4
    (allowed / "reports" / "q3.pdf").write_bytes(pdf)
    (allowed / "notes.txt").write_text("Agenda: budget\n")

    result = await send(
        html="<p>See attached</p>", attachments=["reports/q3.pdf", str(allowed / "notes.txt")]
    )

    [received] = smtp.received
    assert received.get_content_type() == "multipart/mixed"
    assert [p.get_content_type() for p in received.iter_parts()][0] == "multipart/alternative"
    files = [
        (f.get_filename(), f.get_content_type(), f.get_content())
        for f in received.iter_attachments()
    ]
    assert files == [
        ("q3.pdf", "application/pdf", pdf),
        ("notes.txt", "text/plain", "Agenda: budget\n"),
    ]
    assert result.data["attachments"] == ["q3.pdf", "notes.txt"]  # type: ignore[index]


async def test_an_attachment_outside_the_allowed_folder_is_refused(
    smtp: SmtpServer, allowed: Path, tmp_path: Path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not send")
    (allowed / "link.txt").symlink_to(secret)

    for given in ["../secret.txt", str(secret), "link.txt"]:
        error = await failure(attachments=[given])
        assert (error.code, error.recoverable) == ("refused", False)
        assert f"{given} is outside the attachments folder ({allowed}): refused" == str(error)
    assert smtp.envelopes == []


async def test_a_missing_attachment_is_not_found(smtp: SmtpServer, allowed: Path):
    error = await failure(attachments=["reports"])  # a folder is not a file either
    assert (error.code, error.recoverable) == ("not_found", False)
    assert str(error) == f"There is no file reports in {allowed}"
    assert smtp.envelopes == []


async def test_attachments_without_an_allowed_folder_say_how_to_allow_one(
    smtp: SmtpServer, tmp_path: Path
):
    (tmp_path / "a.txt").write_text("x")

    error = await failure(attachments=[str(tmp_path / "a.txt")])

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert "set EMAIL_AGENT_ATTACHMENTS_DIR in the environment" in str(error)
    assert smtp.envelopes == []


async def test_attachments_over_the_limit_are_too_large(
    smtp: SmtpServer, allowed: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_MAX_ATTACHMENT_BYTES", "1000")
    (allowed / "a.bin").write_bytes(b"x" * 600)
    (allowed / "b.bin").write_bytes(b"x" * 600)

    await send(attachments=["a.bin"])
    error = await failure(attachments=["a.bin", "b.bin"])

    assert (error.code, error.recoverable) == ("too_large", False)
    assert str(error) == "The attachments are 1,200 bytes, more than max_attachment_bytes (1,000)"
    assert len(smtp.envelopes) == 1
