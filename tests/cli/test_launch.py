"""The command starts with the cyclic collector paused, and leaves it running, startup frozen."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from orchestrator import launch


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()


def test_the_collector_is_paused_until_the_command_has_started(monkeypatch: pytest.MonkeyPatch):
    seen: dict[str, bool] = {}

    def command() -> None:
        seen["starting"] = gc.isenabled()
        launch.resume_collection()  # what run_command does once the runtime is built
        seen["started"] = gc.isenabled()
        raise SystemExit(0)

    monkeypatch.setattr("orchestrator.cli.main", command)
    with pytest.raises(SystemExit):
        launch.main()

    assert seen == {"starting": False, "started": True}
    assert gc.get_freeze_count() > 0, "what startup made is left out of later collections"


def test_a_command_that_never_says_it_started_leaves_the_collector_running(
    monkeypatch: pytest.MonkeyPatch,
):
    def failing() -> None:
        raise SystemExit(2)

    monkeypatch.setattr("orchestrator.cli.main", failing)
    with pytest.raises(SystemExit):
        launch.main()

    assert gc.isenabled()


@pytest.mark.process
def test_python_dash_m_runs_the_command():
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("orchestrator ")
