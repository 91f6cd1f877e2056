"""Messages a short run stored, embedded after it by a process of their own.

`ask` often ends before the local model has loaded: what it stored would wait
for the next long chat. Instead, a run that ends with messages still waiting
starts `orchestrator db embed --quiet`, detached, which embeds every waiting
message and exits. One such process at a time: it holds a lock in the data
directory, and none is started while one holds it. The lock and the detached
start (`one_at_a_time`, `start_once`) serve the idle job worker too (`jobs.spawn`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TextIO

from orchestrator.private import PRIVATE_FILE, open_private_log, private_data_dir
from orchestrator.settings import Settings

LOCK_FILE = "embedding.lock"
LOG_FILE = Path("logs") / "embedding.log"
COMMAND = ("-m", "orchestrator", "db", "embed", "--quiet")


def embedding_lock(data_dir: Path) -> AbstractContextManager[bool]:
    """Whether this process is the one embedding waiting messages (True while it holds the lock)."""
    return one_at_a_time(data_dir, LOCK_FILE)


def embed_later(settings: Settings) -> bool:
    """Start the embedding process, detached; False when one runs already.

    It reads the same settings (the environment and the working directory are
    this process's) and writes what it says to `data/logs/embedding.log`.
    """
    return start_once(settings.data_dir, lock_file=LOCK_FILE, log_file=LOG_FILE, command=COMMAND)


@contextmanager
def one_at_a_time(data_dir: Path, lock_file: str) -> Generator[bool, None, None]:
    """Whether this process holds `lock_file` of the data directory (True while it does)."""
    path = private_data_dir(data_dir) / lock_file
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


def start_once(
    data_dir: Path, *, lock_file: str, log_file: Path, command: Sequence[str]
) -> bool:
    """Start `python COMMAND` detached, its output in `data/LOG_FILE`; False when one holds the lock.

    The process started takes the lock itself: none is started while one holds it.
    """
    with one_at_a_time(data_dir, lock_file) as free:
        if not free:
            return False
    with open_private_log(data_dir / log_file) as log:
        start_detached([sys.executable, *command], log=log)
    return True


def start_detached(command: list[str], *, log: TextIO, pass_fds: Sequence[int] = ()) -> None:
    """Start `command` in a session of its own, its output appended to `log`; not waited for.

    `pass_fds`: descriptors it inherits (as `subprocess.Popen` passes them).
    """
    subprocess.Popen(  # noqa: S603 (our own command, no shell)
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        pass_fds=pass_fds,
        start_new_session=True,  # a Ctrl-C at the terminal is not meant for it
    )
