"""The orchestrator's own system prompt is a setting: its text, or a file (issue 46, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ConfigError
from orchestrator.graph.prompts import ORCHESTRATOR_PROMPT
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel
from tests.helpers import run_cli

PIRATE = "You are a pirate. Answer every question as a pirate would."


async def system_prompt_seen(tmp_path: Path, **settings: object) -> str:
    seen: list[str] = []

    def answer(messages: list[BaseMessage]) -> str:
        seen.append(messages[0].text)
        return "Arr."

    runtime = Orchestrator.create(
        load_settings(sub_graphs_dir=tmp_path / "none", **settings),
        model=ScriptedChatModel(steps=[answer]),
        checkpointer=InMemorySaver(),
    )
    await runtime.session(user_id="u").run("hello")
    return seen[0]


async def test_the_built_in_prompt_unless_a_text_or_a_file_is_set(tmp_path: Path):
    prompt_file = tmp_path / "prompt.md"
    prompt_file.write_text(f"\n{PIRATE}\n", encoding="utf-8")

    assert (await system_prompt_seen(tmp_path)).startswith(ORCHESTRATOR_PROMPT)
    given = await system_prompt_seen(tmp_path, system_prompt=PIRATE)
    from_file = await system_prompt_seen(tmp_path, system_prompt_file=prompt_file)

    for seen in (given, from_file):
        assert seen.startswith(PIRATE) and ORCHESTRATOR_PROMPT not in seen


def test_a_file_that_cannot_be_read_is_one_line_naming_the_setting(tmp_path: Path):
    missing, binary = tmp_path / "nowhere.md", tmp_path / "prompt.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="ORCHESTRATOR_SYSTEM_PROMPT_FILE: cannot read .*not UTF-8"):
        Orchestrator.create(load_settings(system_prompt_file=binary), checkpointer=InMemorySaver())

    done = run_cli("ask", "hi", cwd=tmp_path, env={"ORCHESTRATOR_SYSTEM_PROMPT_FILE": str(missing)})
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "ORCHESTRATOR_SYSTEM_PROMPT_FILE" in errors[0], done.stderr
    assert "is not a file" in errors[0] and "Traceback" not in done.stderr


def test_the_text_and_the_file_are_not_both_set(tmp_path: Path):
    (tmp_path / "p.md").write_text(PIRATE)
    done = run_cli(
        "ask",
        "hi",
        cwd=tmp_path,
        env={"ORCHESTRATOR_SYSTEM_PROMPT": PIRATE, "ORCHESTRATOR_SYSTEM_PROMPT_FILE": str(tmp_path / "p.md")},
    )
    assert done.returncode != 0
    assert "set ORCHESTRATOR_SYSTEM_PROMPT or ORCHESTRATOR_SYSTEM_PROMPT_FILE, not both" in done.stderr
