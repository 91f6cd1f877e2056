"""A worker for what a command leaves queued, when no worker would take it: `worker --until-idle`.

`ask --no-wait` returns at once, and a chat may end with jobs still waiting
for a free slot: with no worker of another process taking their queues, they
would wait for the next `chat`. So the command starts `orchestrator worker
--until-idle`, detached, which runs what waits, then stops once it has had
nothing to do for `ORCHESTRATOR_WORKER_IDLE_SECONDS`. One at a time: it holds
a lock in the data directory, and none is started while one holds it. Its
output goes to `data/logs/worker.log`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from orchestrator.settings import Settings
from orchestrator.store.embed_later import one_at_a_time, start_once

LOCK_FILE = "worker.lock"
LOG_FILE = Path("logs") / "worker.log"
COMMAND = ("-m", "orchestrator", "worker", "--until-idle")


def idle_worker_lock(data_dir: Path) -> AbstractContextManager[bool]:
    """Whether this process is the worker started for what was left (True while it holds the lock)."""
    return one_at_a_time(data_dir, LOCK_FILE)


def start_worker_later(settings: Settings) -> bool:
    """Start `orchestrator worker --until-idle`, detached; False when one runs already.

    It reads the same settings (the environment and the working directory are
    this process's).
    """
    return start_once(settings.data_dir, lock_file=LOCK_FILE, log_file=LOG_FILE, command=COMMAND)
