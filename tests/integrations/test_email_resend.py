"""email_agent sending through Resend (`EMAIL_AGENT_PROVIDER=resend`), against a local
server speaking Resend's documented API: what it sends, and each error code with whether
it is marked retryable."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import JsonValue

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import ToolRequest, ToolResult
from tests.integrations.folders import free_port
from tests.integrations.resend_server import KEY, ResendServer
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "personal_assistant_agent" / "src" / "sub_graphs" / "email_agent"


@pytest.fixture
def resend(monkeypatch: pytest.MonkeyPatch) -> Iterator[ResendServer]:
    with ResendServer() as server:
        for name, value in {
            "EMAIL_AGENT_PROVIDER": "resend",
            "EMAIL_AGENT_RESEND_BASE_URL": server.base_url,
            "EMAIL_AGENT_FROM_ADDRESS": "Assistant <assistant@example.org>",
            "RESEND_API_KEY": KEY,
        }.items():
            monkeypatch.setenv(name, value)
        yield server


async def send(**parameters: JsonValue) -> ToolResult:
    mail = {"to": ["bob@example.com"], "subject": "Hi", "body": "See you at 5."} | parameters
    agent = load_tool_folder(FOLDER)
    return await agent.execute(ToolRequest(request_id="r1", action="send", parameters=mail))


async def failure(**parameters: JsonValue) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await send(**parameters)
    return caught.value


async def test_an_email_goes_through_resend_with_everything_smtp_sends(
    resend: ResendServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / "q3.pdf").write_bytes(b"%PDF-1.4 the figures")
    monkeypatch.setenv("EMAIL_AGENT_ATTACHMENTS_DIR", str(tmp_path))

    sent = await send(
        cc=["carol@example.com"], bcc=["me@example.org"], reply_to=["team@example.org"],
        html="<p>See you at <b>5</b>.</p>", attachments=["q3.pdf"],
    )

    (email,) = resend.emails
    assert email["from"] == "Assistant <assistant@example.org>"
    assert (email["to"], email["cc"], email["bcc"]) == (
        ["bob@example.com"], ["carol@example.com"], ["me@example.org"]
    )
    assert email["reply_to"] == ["team@example.org"]
    assert (email["subject"], email["text"].strip()) == ("Hi", "See you at 5.")
    assert email["html"].strip() == "<p>See you at <b>5</b>.</p>"
    (attached,) = email["attachments"]
    assert attached["filename"] == "q3.pdf" and attached["content_type"] == "application/pdf"
    assert base64.b64decode(attached["content"]) == b"%PDF-1.4 the figures"
    assert sent.message == "Email sent to bob@example.com, carol@example.com (bcc: me@example.org) through Resend."
    assert sent.data["provider_id"] and sent.data["message_id"]


async def test_no_key_is_not_configured_naming_resends_variable(
    resend: ResendServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("RESEND_API_KEY")

    error = await failure()

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert "RESEND_API_KEY" in str(error) and "tool_config.yaml" not in str(error), (
        "a key is never offered the folder's shared tool_config.yaml"
    )
    assert resend.emails == []


async def test_a_wrong_key_is_bad_credentials(resend: ResendServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RESEND_API_KEY", "re_wrong")

    error = await failure()

    assert (error.code, error.recoverable) == ("bad_credentials", False)
    assert "invalid_api_key" in str(error)


async def test_a_sender_on_a_domain_not_verified_is_refused(
    resend: ResendServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_FROM_ADDRESS", "me@unverified.example")

    error = await failure()

    assert (error.code, error.recoverable) == ("refused", False)
    assert "The unverified.example domain is not verified" in str(error)


async def test_the_rate_limit_and_resends_own_failure_are_retryable(resend: ResendServer):
    resend.next_failure = (429, "rate_limit_exceeded")

    limited = await failure()

    assert (limited.code, limited.recoverable) == ("rate_limited", True)
    resend.next_failure = (500, "application_error")
    broken = await failure()
    assert (broken.code, broken.recoverable) == ("server_error", True)
    assert resend.emails == []


async def test_a_quota_spent_is_not_retryable(resend: ResendServer):
    resend.next_failure = (429, "daily_quota_exceeded")

    error = await failure()

    assert (error.code, error.recoverable) == ("quota_exceeded", False)


async def test_resend_down_is_unreachable_and_retryable(
    resend: ResendServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_RESEND_BASE_URL", f"http://127.0.0.1:{free_port()}")

    error = await failure()

    assert (error.code, error.recoverable) == ("server_unreachable", True)


async def test_a_sender_resend_calls_malformed_is_not_configured_naming_from_address(
    resend: ResendServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("EMAIL_AGENT_FROM_ADDRESS", "Assistant <assistant at example.org>")

    error = await failure()

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert "invalid_from_address" in str(error) and "EMAIL_AGENT_FROM_ADDRESS" in str(error)
    assert resend.emails == []
