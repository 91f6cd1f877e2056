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

import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.private import PRIVATE_FILE, open_private_log, private_data_dir
from orchestrator.settings import Settings
from orchestrator.store.embed_later import start_detached

LOCK_FILE = "worker.lock"
LOG_FILE = Path("logs") / "worker.log"
COMMAND = ("-m", "orchestrator", "worker", "--until-idle")


@contextmanager
def idle_worker_lock(data_dir: Path) -> Iterator[bool]:
    """Whether this process is the worker started for what was left (True while it holds the lock)."""
    path = private_data_dir(data_dir) / LOCK_FILE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(descriptor)  # and with it the lock


def start_worker_later(settings: Settings) -> bool:
    """Start `orchestrator worker --until-idle`, detached; False when one runs already.

    It reads the same settings (the environment and the working directory are
    this process's).
    """
    with idle_worker_lock(settings.data_dir) as free:
        if not free:
            return False
    with open_private_log(settings.data_dir / LOG_FILE) as log:
        start_detached([sys.executable, *COMMAND], log=log)
    return True
