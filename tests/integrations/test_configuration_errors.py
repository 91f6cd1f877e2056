"""The shipped agents' configuration errors as the user reads them (issue 42, item 10).

They name the exact variable and the exact `.env` files (no `<FIELD>` or `<path>`
placeholder, which a chat's Markdown renders as nothing); a secret is never
advised into tool_config.yaml; what the user configured (the documents folder, the
SQLite file) is shown, not hidden as `<path>`; a slash command stays a word.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict

from orchestrator.redact import redact
from orchestrator.tools import ToolSettings
from tests.integrations.folders import approved_copy


def envelope_error(done: object) -> str:
    """The error message of a `run --json` envelope that failed."""
    envelope = json.loads(done.stdout)  # type: ignore[attr-defined]
    assert envelope["success"] is False, envelope
    return str(envelope["error"]["message"])


def test_slack_without_a_token_names_its_variable_and_both_env_files(cli, tmp_path: Path):
    approved_copy(cli, tmp_path, "slack_agent")

    done = cli("run", "slack_agent", "read", "--json", '{"channel": "#general"}', cwd=tmp_path)

    message = envelope_error(done)
    folder_env = tmp_path / "sub_graphs" / "slack_agent" / ".env"
    assert message == (
        "slack_agent is not configured: token: Field required "
        f"(set SLACK_AGENT_TOKEN in the environment or in {folder_env} or {tmp_path / '.env'})"
    )
    assert "tool_config.yaml" not in message, "the token is a secret: never advised into the folder"


def test_a_field_that_is_no_secret_is_also_offered_tool_config_yaml(cli, tmp_path: Path):
    approved_copy(cli, tmp_path, "personal_assistant_agent", "personal_assistant_agent/email_agent")
    mail = {"to": ["bob@example.com"], "subject": "Hi", "body": "x"}

    done = cli(
        "run", "personal_assistant_agent/email_agent", "send", "--json", json.dumps(mail),
        "--yes", cwd=tmp_path,
    )

    folder = tmp_path / "sub_graphs" / "personal_assistant_agent" / "src" / "sub_graphs" / "email_agent"
    message = envelope_error(done)
    assert "set EMAIL_AGENT_FROM_ADDRESS in the environment or in " in message
    assert f"{folder / '.env'} or {tmp_path / '.env'}" in message
    assert f"or from_address under config: in {folder / 'tool_config.yaml'})" in message
    assert "<" not in message


def test_the_documents_folder_and_the_sqlite_file_the_user_configured_are_shown(cli, tmp_path: Path):
    approved_copy(
        cli, tmp_path, "research_agent", "research_agent/document_analysis_agent", "database_agent"
    )
    documents, database = tmp_path / "my documents", tmp_path / "data" / "shop.db"
    documents.mkdir()
    env = {
        "DOCUMENT_ANALYSIS_AGENT_DOCUMENTS_DIR": str(documents),
        "DATABASE_AGENT_URL": f"sqlite:///{database}",
    }

    ingest = cli(
        "run", "research_agent/document_analysis_agent", "ingest", "--json", '{"path": "q3.pdf"}',
        cwd=tmp_path, env_extra=env,
    )
    query = cli(
        "run", "database_agent", "query", "--json", '{"sql": "SELECT 1"}', cwd=tmp_path, env_extra=env
    )

    assert f"There is no file q3.pdf in {documents}." in envelope_error(ingest)
    assert f"There is no SQLite database at {database}" in envelope_error(query)


class Configured(ToolSettings):
    model_config = SettingsConfigDict(env_prefix="CONFIGURED_TEST_")

    documents_dir: Path
    url: SecretStr


def test_a_slash_command_is_a_word_and_a_path_is_still_hidden():
    said = "use /search to look it up; try /compact, then /search. Not /etc/passwd"

    assert redact(said) == "use /search to look it up; try /compact, then /search. Not <path>"


def test_paths_a_tools_settings_name_are_shown_and_no_others(tmp_path: Path):
    documents, database = tmp_path / "docs", tmp_path / "db" / "app.sqlite"
    Configured.load(
        {"documents_dir": str(documents), "url": f"sqlite:///{database}"}, tool="configured"
    )

    text = f"no {documents / 'a.pdf'}; no database at {database}; not {tmp_path / 'other' / 'x'}"

    assert redact(text) == f"no {documents / 'a.pdf'}; no database at {database}; not <path>"
