"""Settings from the environment and `.env`, and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import settings as settings_module
from orchestrator.errors import ConfigError
from orchestrator.llm import OfflineChatModel, build_chat_model
from orchestrator.settings import env_file, load_settings


def test_defaults(tmp_path: Path):
    settings = load_settings()
    assert settings.max_tool_iterations == 5
    assert settings.max_tool_result_chars == 4000
    assert settings.data_dir == tmp_path / "data"  # the home: ORCHESTRATOR_HOME in the tests
    assert settings.sub_graphs_dir == tmp_path / "sub_graphs"
    assert settings.uses_offline_model


def test_the_default_home_is_the_checkout_not_the_current_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.delenv("ORCHESTRATOR_HOME")
    checkout = Path(__file__).resolve().parents[2]
    assert env_file() == checkout / ".env"
    # Not the checkout's own .env: a user's (another data directory, say) is not the default.
    monkeypatch.setattr(settings_module, "env_file", lambda: tmp_path / "absent.env")
    settings = load_settings()
    assert settings.data_dir == checkout / "data"
    assert settings.sub_graphs_dir == checkout / "sub_graphs"
    assert Path.cwd() == tmp_path, "run from elsewhere, the same data is used"


def test_a_model_without_an_endpoint_is_an_error_not_the_offline_model():
    with pytest.raises(ConfigError) as caught:
        load_settings(model="gpt-4o")
    assert str(caught.value).startswith("ORCHESTRATOR_MODEL='gpt-4o' needs OPENAI_API_KEY")
    assert load_settings(model="offline").uses_offline_model
    assert load_settings(model="gpt-4o", openai_base_url="http://127.0.0.1:1/v1").model_name == "gpt-4o"


def test_embeddings_are_checked_with_the_other_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ORCHESTRATOR_EMBEDDINGS", "openai")
    with pytest.raises(ConfigError, match="ORCHESTRATOR_EMBEDDINGS='openai': use auto, local, none"):
        load_settings()
    monkeypatch.setenv("ORCHESTRATOR_EMBEDDINGS", "openai:text-embedding-3-small")
    assert load_settings().embeddings == "openai:text-embedding-3-small"


def test_environment_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    (tmp_path / ".env").write_text("ORCHESTRATOR_MAX_TOOL_ITERATIONS=7\nOPENAI_BASE_URL=http://127.0.0.1:1/v1\n")
    monkeypatch.setenv("ORCHESTRATOR_LOG_LEVEL", "debug")
    settings = load_settings()
    assert settings.max_tool_iterations == 7
    assert settings.log_level == "DEBUG"
    assert settings.openai_base_url == "http://127.0.0.1:1/v1"
    assert not settings.uses_offline_model


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ORCHESTRATOR_MAX_TOOL_ITERATIONS", "many"),
        ("ORCHESTRATOR_MAX_TOOL_ITERATIONS", "0"),
        ("ORCHESTRATOR_MAX_TOOL_RESULT_CHARS", "10"),
        ("ORCHESTRATOR_LOG_LEVEL", "loud"),
        ("ORCHESTRATOR_TOOL_TIMEOUT_SECONDS", ".inf"),
        ("ORCHESTRATOR_TOOL_TIMEOUT_SECONDS", "nan"),
        ("ORCHESTRATOR_MODEL_TIMEOUT_SECONDS", "inf"),
        ("ORCHESTRATOR_INLINE_BUDGET_SECONDS", "1e12"),
    ],
)
def test_bad_value_names_the_setting(monkeypatch: pytest.MonkeyPatch, name: str, value: str):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.lower().startswith(f"invalid setting {name}='{value}'".lower())
    assert "\n" not in message


def test_offline_unless_a_model_endpoint_is_configured(monkeypatch: pytest.MonkeyPatch):
    assert isinstance(build_chat_model(load_settings()), OfflineChatModel)
    assert isinstance(build_chat_model(load_settings(model="offline", openai_api_key="k")), OfflineChatModel)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = build_chat_model(load_settings(model="openai:gpt-4o-mini"))
    assert type(model).__name__ == "ChatOpenAI"


def test_unknown_provider_is_a_config_error():
    with pytest.raises(ConfigError, match="ORCHESTRATOR_MODEL='nosuchprovider:x'"):
        build_chat_model(load_settings(model="nosuchprovider:x"))


def test_an_unknown_provider_is_one_line():
    with pytest.raises(ConfigError) as caught:
        build_chat_model(load_settings(model="nosuchprovider:x"))
    assert "\n" not in str(caught.value)


def test_a_data_directory_that_is_a_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ORCHESTRATOR_DATA_DIR", str(tmp_path / "afile"))
    with pytest.raises(ConfigError, match=r"Invalid setting ORCHESTRATOR_DATA_DIR=.*afile.*: not a directory"):
        load_settings()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("localhost:8080/v1", "the URL has no scheme: write it as http://localhost:8080/v1 (or https://...)"),
        ("127.0.0.1:11434/v1", "the URL has no scheme: write it as http://127.0.0.1:11434/v1 (or https://...)"),
        ("ftp://models.example/v1", "use an http:// or https:// URL of the server, such as http://127.0.0.1:8080/v1"),
        ("http:///v1", "use an http:// or https:// URL of the server, such as http://127.0.0.1:8080/v1"),
    ],
)
def test_a_base_url_the_client_cannot_use_is_refused_at_start(
    url: str, expected: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f"Invalid setting OPENAI_BASE_URL={url!r}: {expected} (set in the environment)"


def test_a_base_url_without_a_scheme_stops_the_command_before_any_model_call(tmp_path: Path):
    from tests.helpers import run_cli

    done = run_cli(
        "ask", "hi", cwd=tmp_path, env={"OPENAI_BASE_URL": "localhost:8080/v1", "ORCHESTRATOR_MODEL": "openai:m"}
    )

    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "error: Invalid setting OPENAI_BASE_URL='localhost:8080/v1': the URL has no scheme: "
        "write it as http://localhost:8080/v1 (or https://...) (set in the environment)"
    )
    assert "://?" not in done.stderr and "Traceback" not in done.stderr
