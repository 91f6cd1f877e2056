"""Messages a short run stored, embedded after it by a process of their own.

`ask` often ends before the local model has loaded: what it stored would wait
for the next long chat. Instead, a run that ends with messages still waiting
starts `orchestrator db embed --quiet`, detached, which embeds every waiting
message and exits. One such process at a time: it holds a lock in the data
directory, and none is started while one holds it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from orchestrator.private import PRIVATE_FILE, open_private_log, private_data_dir
from orchestrator.settings import Settings

LOCK_FILE = "embedding.lock"
LOG_FILE = Path("logs") / "embedding.log"
COMMAND = ("-m", "orchestrator", "db", "embed", "--quiet")


@contextmanager
def embedding_lock(data_dir: Path) -> Iterator[bool]:
    """Whether this process is the one embedding waiting messages (True while it holds the lock)."""
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


def embed_later(settings: Settings) -> bool:
    """Start the embedding process, detached; False when one runs already.

    It reads the same settings (the environment and the working directory are
    this process's) and writes what it says to `data/logs/embedding.log`.
    """
    with embedding_lock(settings.data_dir) as free:
        if not free:
            return False
    with open_private_log(settings.data_dir / LOG_FILE) as log:
        start_detached([sys.executable, *COMMAND], log=log)
    return True


def start_detached(command: list[str], *, log: TextIO) -> None:
    """Start `command` in a session of its own, its output appended to `log`; not waited for."""
    subprocess.Popen(  # noqa: S603 (our own command, no shell)
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,  # a Ctrl-C at the terminal is not meant for it
    )
