"""Starting, describing and stopping the warm process, for the entry point and `orchestrator warm`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from orchestrator.warm.preload import record
from orchestrator.warm.protocol import SERVE_FLAG, path_in, runtime_dir


def start(*, minutes: float, environment: dict[str, str]) -> bool:
    """Start the warm process, detached, with the modules this process loaded; False if one runs.

    `environment` is the one the command started with: Python's options (UTF-8 mode
    follows the locale) must be those of the commands it takes.
    """
    folder = runtime_dir(create=True)
    if folder is None or minutes <= 0 or _lock_held(folder):
        return False
    record(path_in(folder, "modules"))
    # -P: nothing from the working directory, so its Python path is the commands'. UTF-8
    # mode as this process's: Python turned a C locale into C.UTF-8 in `environment`.
    utf8 = f"utf8={sys.flags.utf8_mode}"
    command = [sys.executable, "-P", "-X", utf8, "-m", "orchestrator", SERVE_FLAG, f"{minutes:g}"]
    with open(path_in(folder, "log"), "a", opener=_private_opener) as log:
        subprocess.Popen(  # noqa: S603 (our own command, no shell)
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd="/", env=environment
        )
    return True


@dataclass(frozen=True)
class WarmState:
    """The warm process of this installation, as its files describe it."""

    pid: int
    since: datetime
    idle_minutes: float

    def describe(self) -> str:
        since = self.since.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        return f"running since {since} (pid {self.pid}); it stops after {self.idle_minutes:g} min without a command"


def state() -> WarmState | None:
    """The warm process running for this installation, or None."""
    folder = runtime_dir(create=False)
    if folder is None or not _lock_held(folder):
        return None
    try:
        fields = json.loads(path_in(folder, "json").read_text())
        return WarmState(
            pid=int(fields["pid"]),
            since=datetime.fromtimestamp(float(fields["since"])),
            idle_minutes=float(fields["idle_minutes"]),
        )
    except (OSError, ValueError, KeyError):
        return None  # starting, or stopping


def stop() -> WarmState | None:
    """Ask the warm process to stop taking commands (those running finish); what was stopped."""
    running = state()
    if running is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGTERM)
    return running


def _lock_held(folder: Path) -> bool:
    descriptor = os.open(path_in(folder, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)
