"""email_agent reading mail against pymap's IMAP server on 127.0.0.1: list, search, read one,
read-only, and each documented error code with whether it is marked retryable."""

from __future__ import annotations

import functools
import re
import socket
from collections.abc import Iterator
from email.message import EmailMessage

import pytest
from pydantic import JsonValue

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.folders.sensitivity import WHY_AUTHOR, SensitivityRules
from orchestrator.folders.tool_config import load_tool_config
from orchestrator.sources.adapter import langchain_tools
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest, ToolResult
from tests.integrations.folders import free_port
from tests.integrations.imap_server import PASSWORD, USER, ImapServer, ScriptedImap
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "personal_assistant_agent" / "src" / "sub_graphs" / "email_agent"


def mail(
    sender: str, subject: str, day: int, text: str | None, *, html: str | None = None
) -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, "ada@example.org", subject
    message["Date"] = f"Mon, {day:02d} Nov 2026 09:30:00 +0100"
    if text is not None:
        message.set_content(text)
        if html is not None:
            message.add_alternative(html, subtype="html")
    elif html is not None:
        message.set_content(html, subtype="html")
    return message.as_bytes()


@pytest.fixture
def imap(monkeypatch: pytest.MonkeyPatch) -> Iterator[ImapServer]:
    """Three messages in INBOX (101 read, 102 and 103 not), one in Archive; the agent's login is
    the SMTP one (no IMAP_USERNAME), as for one account."""
    with ImapServer() as server:
        server.append(
            "INBOX", mail("Bob <bob@example.com>", "Lunch", 2, "Noon at Luigi's?"), seen=True
        )
        report = EmailMessage()
        report.set_content("Figures attached.")
        report.add_alternative("<p>Figures <b>attached</b>.</p>", subtype="html")
        report.add_attachment(
            b"%PDF-1.4 " + b"x" * 1000, maintype="application", subtype="pdf", filename="q3.pdf"
        )
        report["From"], report["To"], report["Subject"] = (
            "carol@example.com",
            "ada@example.org",
            "Q3 report",
        )
        report["Date"] = "Fri, 20 Nov 2026 17:05:00 +0000"
        server.append("INBOX", report.as_bytes())
        page = "<html><style>p {color: red}</style><body><h1>Friday</h1><p>Café at 10?</p></body></html>"
        server.append("INBOX", mail("Zoë <zoe@example.com>", "Café on Friday", 25, None, html=page))
        server.append("Archive", mail("bob@example.com", "Old news", 1, "Long ago."), seen=True)
        for name, value in {
            "IMAP_HOST": "127.0.0.1",
            "IMAP_PORT": str(server.port),
            "IMAP_SECURITY": "none",
            "FROM_ADDRESS": "ada@example.org",
            "SMTP_USERNAME": USER,
            "SMTP_PASSWORD": PASSWORD,
        }.items():
            monkeypatch.setenv(f"EMAIL_AGENT_{name}", value)
        yield server


@functools.cache
def agent() -> Tool:
    return load_tool_folder(FOLDER)


async def call(action: str, **parameters: JsonValue) -> ToolResult:
    return await agent().execute(ToolRequest(request_id="r1", action=action, parameters=parameters))


async def failure(action: str, **parameters: JsonValue) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await call(action, **parameters)
    return caught.value


def flags(server: ImapServer, mailbox: str = "INBOX") -> dict[int, bool]:
    """Whether each message is marked read, as the server holds it."""
    client = server.client()
    client.select(mailbox, readonly=True)
    _, data = client.uid("FETCH", "1:*", "(UID FLAGS)")
    client.logout()
    found = (
        re.search(rb"UID (\d+) FLAGS \(([^)]*)\)", line) for line in data if isinstance(line, bytes)
    )
    return {int(m.group(1)): b"\\Seen" in m.group(2) for m in found if m}


async def test_list_the_newest_messages(imap: ImapServer):
    listed = await call("list_messages", limit=2)

    assert listed.message == (
        "2 of 3 in INBOX, newest first:\n"
        "#103 2026-11-25T09:30+01:00 Zoë <zoe@example.com>: Café on Friday (unread)\n"
        "#102 2026-11-20T17:05+00:00 carol@example.com: Q3 report (unread)"
    )
    assert listed.data["total"] == 3  # type: ignore[index]
    assert listed.data["messages"][1] == {  # type: ignore[index]
        "uid": 102,
        "from": "carol@example.com",
        "to": "ada@example.org",
        "subject": "Q3 report",
        "date": "2026-11-20T17:05+00:00",
        "seen": False,
    }


async def test_list_unread_only_and_another_mailbox(imap: ImapServer):
    unread = await call("list_messages", unread_only=True)
    archive = await call("list_messages", mailbox="Archive")

    assert [m["uid"] for m in unread.data["messages"]] == [103, 102]  # type: ignore[index, union-attr]
    assert (
        archive.message
        == "1 of 1 in Archive, newest first:\n#101 2026-11-01T09:30+01:00 bob@example.com: Old news"
    )


async def test_search_by_sender_subject_text_and_dates(imap: ImapServer):
    async def uids(**criteria: JsonValue) -> list[int]:
        found = await call("search", **criteria)
        return [m["uid"] for m in found.data["messages"]]  # type: ignore[index, union-attr]

    assert await uids(from_address="bob@example.com") == [101]
    assert await uids(subject="café") == [103]  # non-ASCII, as UTF-8
    assert await uids(text="figures") == [102]  # in the body
    assert await uids(since="2026-11-20") == [103, 102]
    assert await uids(before="2026-11-20", subject="lunch") == [101]
    assert await uids(unread_only=True, from_address="example.com") == [103, 102]
    nothing = await call("search", subject="invoice")
    assert (nothing.message, nothing.data["total"]) == ("No messages in INBOX match.", 0)  # type: ignore[index]


async def test_a_search_needs_a_criterion(imap: ImapServer):
    with pytest.raises(InvalidToolArgumentsError, match="give at least one of from_address"):
        await call("search")


async def test_read_one_message_with_its_attachments(imap: ImapServer):
    read = await call("read", uid=102)

    assert read.message == (
        "From: carol@example.com\nTo: ada@example.org\nDate: Fri, 20 Nov 2026 17:05:00 +0000\n"
        "Subject: Q3 report\nAttachments: q3.pdf (application/pdf, 1,009 bytes)\n\nFigures attached."
    )
    assert read.data["attachments"] == [  # type: ignore[index]
        {"filename": "q3.pdf", "content_type": "application/pdf", "bytes": 1009}
    ]
    assert (read.data["body"], read.data["truncated"]) == ("Figures attached.", False)  # type: ignore[index]


async def test_an_html_only_message_is_read_as_text_and_a_long_one_is_cut(imap: ImapServer):
    html = await call("read", uid=103)
    cut = await call("read", uid=102, max_chars=100)
    imap.append("INBOX", mail("bob@example.com", "Long", 26, "word " * 100))
    long = await call("read", uid=104, max_chars=100)

    assert html.message.endswith("Subject: Café on Friday\n\nFriday\nCafé at 10?")
    assert cut.data["truncated"] is False  # type: ignore[index]
    assert long.data["truncated"] is True and len(long.data["body"]) == 100  # type: ignore[index, arg-type]
    assert long.message.endswith("[cut at 100 of 499 characters]")


async def test_reading_marks_nothing_read(imap: ImapServer):
    before = flags(imap)

    await call("list_messages")
    await call("search", subject="report")
    await call("read", uid=102)
    await call("read", uid=103)

    assert flags(imap) == before == {101: True, 102: False, 103: False}


def test_only_sending_asks_first():
    config = load_tool_config(FOLDER / "tool_config.yaml")
    rules = SensitivityRules()
    why = {t.name: rules.why(t.name, t.metadata) for t in langchain_tools(agent(), config=config)}
    assert why == {
        "email_agent_send": WHY_AUTHOR,
        "email_agent_list_messages": None,
        "email_agent_search": None,
        "email_agent_read": None,
    }


# The documented error codes


async def test_a_mailbox_or_message_that_does_not_exist_is_not_found(imap: ImapServer):
    mailbox = await failure("list_messages", mailbox="Receipts")
    message = await failure("read", uid=999)

    assert (mailbox.code, mailbox.recoverable) == ("not_found", False)
    assert str(mailbox) == "There is no mailbox 'Receipts'; the account has INBOX, Archive"
    assert (message.code, message.recoverable) == ("not_found", False)
    assert str(message) == "There is no message #999 in INBOX; list_messages shows their numbers"


async def test_a_wrong_imap_password_is_bad_credentials(
    imap: ImapServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_IMAP_USERNAME", USER)
    monkeypatch.setenv("EMAIL_AGENT_IMAP_PASSWORD", "wrong")  # wins over the right SMTP one

    error = await failure("list_messages")

    assert (error.code, error.recoverable) == ("bad_credentials", False)
    assert f"127.0.0.1:{imap.port} refused the login of 'ada': [AUTHENTICATIONFAILED]" in str(error)
    assert "wrong" not in str(error)


async def test_an_imap_server_that_is_down_is_unreachable_and_retryable(
    imap: ImapServer, monkeypatch: pytest.MonkeyPatch
):
    port = free_port()
    monkeypatch.setenv("EMAIL_AGENT_IMAP_PORT", str(port))

    error = await failure("search", subject="x")

    assert (error.code, error.recoverable) == ("server_unreachable", True)
    assert str(error) == f"Could not reach the IMAP server 127.0.0.1:{port}: Connection refused"


async def test_reading_without_an_imap_server_says_how_to_set_one(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EMAIL_AGENT_FROM_ADDRESS", "ada@example.org")

    error = await failure("list_messages")

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert (
        "Reading mail needs the IMAP server: set EMAIL_AGENT_IMAP_HOST in the environment"
        in str(error)
    )


async def test_imap_security_that_the_server_cannot_do_says_which_setting(
    imap: ImapServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_IMAP_SECURITY", "starttls")
    starttls = await failure("list_messages")
    monkeypatch.setenv("EMAIL_AGENT_IMAP_SECURITY", "ssl")
    implicit = await failure("list_messages")

    assert (starttls.code, starttls.recoverable) == ("not_configured", False)
    assert f"127.0.0.1:{imap.port} does not offer STARTTLS" in str(starttls)
    assert "set EMAIL_AGENT_IMAP_SECURITY in the environment" in str(starttls)
    assert (implicit.code, implicit.recoverable) == ("not_configured", False)
    assert "check imap_security" in str(implicit)


async def test_a_mailbox_with_a_non_ascii_name(imap: ImapServer):
    imap.append(
        "Entw&APw-rfe",
        mail(  # the name on the wire, modified UTF-7
            "bob@example.com", "Entwurf", 3, "Noch nicht fertig."
        ),
    )

    listed = await call("list_messages", mailbox="Entwürfe")
    missing = await failure("list_messages", mailbox="Brouillons")

    assert listed.message.startswith("1 of 1 in Entwürfe, newest first:\n#101 ")
    assert (
        str(missing) == "There is no mailbox 'Brouillons'; the account has INBOX, Archive, Entwürfe"
    )


async def test_a_line_break_in_a_search_or_mailbox_is_refused_before_it_reaches_the_server(
    imap: ImapServer,
):
    # sent as it is, the line break would end the command and the server would run the rest
    with pytest.raises(InvalidToolArgumentsError, match="has a line break"):
        await call("search", subject='x"\r\nA1 DELETE INBOX')
    with pytest.raises(InvalidToolArgumentsError, match="has a line break"):
        await call("read", uid=101, mailbox="INBOX\r\nA1 DELETE INBOX")

    assert (await call("list_messages")).data["total"] == 3  # type: ignore[index]


async def test_two_non_ascii_terms_in_one_search_are_refused(imap: ImapServer):
    with pytest.raises(ToolError, match="Only one of from_address, to, subject and text") as caught:
        await call("search", subject="café", from_address="zoë")
    assert caught.value.code == "invalid_arguments" and not caught.value.recoverable


async def test_an_imap_server_that_drops_the_connection_or_never_answers_is_unreachable(
    imap: ImapServer, monkeypatch: pytest.MonkeyPatch
):
    with ScriptedImap(drop=True) as dropping:
        monkeypatch.setenv("EMAIL_AGENT_IMAP_PORT", str(dropping.port))
        dropped = await failure("list_messages")
    with socket.socket() as silent:  # connections queue in its backlog; nothing greets them
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("EMAIL_AGENT_IMAP_PORT", str(silent.getsockname()[1]))
        monkeypatch.setenv("EMAIL_AGENT_TIMEOUT_SECONDS", "0.2")
        waited = await failure("list_messages")

    assert (dropped.code, dropped.recoverable) == ("server_unreachable", True)
    assert "the connection was dropped" in str(dropped)
    assert (waited.code, waited.recoverable) == ("server_unreachable", True)
    assert str(waited).endswith("no answer within 0.2 s (timeout_seconds)")


async def test_anything_else_the_server_refuses_is_an_imap_error(
    imap: ImapServer, monkeypatch: pytest.MonkeyPatch
):
    with ScriptedImap(refusal="Search is down for maintenance") as refusing:
        monkeypatch.setenv("EMAIL_AGENT_IMAP_PORT", str(refusing.port))
        error = await failure("search", subject="report")

    assert (error.code, error.recoverable) == ("imap_error", True)
    assert str(error) == (
        f"127.0.0.1:{refusing.port} refused the request: [UNAVAILABLE] Search is down for maintenance"
    )


async def test_a_body_in_a_charset_python_does_not_know_is_still_read(imap: ImapServer):
    imap.append(
        "INBOX",
        b"From: bob@example.com\r\nSubject: Odd\r\nDate: Thu, 26 Nov 2026 08:00:00 +0000\r\n"
        b"Content-Type: text/plain; charset=x-unknown-8\r\n\r\nCaf\xc3\xa9 at 10\r\n",
    )

    read = await call("read", uid=104)

    assert read.data["body"] == "Café at 10"  # type: ignore[index]


async def test_reading_without_a_login_says_how_to_set_one(
    imap: ImapServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("EMAIL_AGENT_SMTP_USERNAME")
    monkeypatch.delenv("EMAIL_AGENT_SMTP_PASSWORD")

    error = await failure("list_messages")

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert (
        "Reading mail needs the IMAP login: set EMAIL_AGENT_IMAP_USERNAME and "
        "EMAIL_AGENT_IMAP_PASSWORD in the environment"
    ) in str(error)


async def test_a_listing_is_at_most_100(imap: ImapServer):
    with pytest.raises(InvalidToolArgumentsError, match="limit"):
        await call("list_messages", limit=101)
