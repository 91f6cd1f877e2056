"""`/context` and `/compact [focus]` in chat (issue 29), on the offline model's extractive summary."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers import run_cli
from tests.tool_folders import parrot_agent

LONG = "Plan the garden party for Saturday. " + "We need chairs, tables and lemonade. " * 20


def test_context_shows_the_window_and_compact_summarises_older_messages(cli, tmp_path: Path):
    lines = [f"{LONG} ({n})" for n in range(4)] + ["/context", "/compact chairs", "/context", "/history"]
    done = cli(
        "chat",
        cwd=tmp_path,
        stdin="\n".join(lines) + "\n",
        env_extra={"ORCHESTRATOR_CONTEXT_TOKENS": "100000"},
    )

    assert done.returncode == 0, done.stderr
    bars = re.findall(r"(\d+)/100000 tokens \(\d+%\): system \d+, tools \d+, summary (\d+), messages (\d+)", done.stdout)
    assert len(bars) == 2, done.stdout
    (before_used, before_summary, before_messages), (after_used, after_summary, after_messages) = bars
    assert before_summary == "0" and int(after_summary) > 0
    assert int(after_messages) < int(before_messages), "the summarised messages left the view"
    assert "older message(s) summarised" in done.stdout
    shown = [line for line in done.stdout.splitlines() if line.startswith("you: Plan the garden")]
    assert len(shown) == 4, "/history shows the summarised messages too (from the archive)"


def test_compact_with_nothing_to_summarise_says_so(cli, tmp_path: Path):
    done = cli("chat", cwd=tmp_path, stdin="/compact\n")

    assert done.returncode == 0, done.stderr
    assert "Nothing to compact yet." in done.stdout


def test_compact_on_a_short_conversation_says_there_is_nothing_to_gain_and_changes_nothing(
    cli, tmp_path: Path
):
    done = cli("chat", cwd=tmp_path, stdin="Hello there.\n/context\n/compact\n/context\n")

    assert done.returncode == 0, done.stderr
    assert "Nothing to gain: a summary would not be shorter" in done.stdout
    assert "summarised" not in done.stdout
    bars = re.findall(r"(\d+)/\d+ tokens \(\d+%\): system \d+, tools \d+, summary (\d+)", done.stdout)
    assert len(bars) == 2 and bars[0] == bars[1] and bars[1][1] == "0", "the view did not grow"


def test_tools_show_says_which_window_applies(tmp_path: Path):
    parrot_agent(tmp_path / "sub_graphs", llm={"context_tokens": 5000})
    assert run_cli("tools", "approve", "parrot", cwd=tmp_path).returncode == 0
    (tmp_path / "other").mkdir()
    plain_root = tmp_path / "other"
    parrot_agent(plain_root / "sub_graphs")
    assert run_cli("tools", "approve", "parrot", cwd=plain_root).returncode == 0

    shown = run_cli("tools", "show", "parrot", cwd=tmp_path)
    own = json.loads(run_cli("tools", "show", "parrot", "--json", cwd=tmp_path).stdout)
    inherited = json.loads(run_cli("tools", "show", "parrot", "--json", cwd=plain_root).stdout)

    assert "context window: the model profile's max_input_tokens, else 5000 tokens" in shown.stdout
    assert own["context_tokens"]["value"] == 5000 and not own["context_tokens"]["inherited"]
    assert inherited["context_tokens"]["value"] == 32000 and inherited["context_tokens"]["inherited"]
