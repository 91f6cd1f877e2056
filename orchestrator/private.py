"""Files and folders the product writes for its user alone: folders 0700, files 0600.

What lands under the data directory may be secret: a server's log may hold a key it
printed, the database and the chat history hold conversations, the approvals say what
may run. Another account on the machine reads none of it, whatever the umask.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# As root the embedded server runs as a user of its own, who must pass through the data
# directory to its pgdata: others may pass, not list (what is inside is private itself).
PASSABLE_DIR = 0o711


def private_dir(path: Path, *, levels: int = 1) -> Path:
    """`path` made if missing and private, with its `levels - 1` nearest parents.

    Folders made earlier with other modes are made private too.
    """
    folders = [path, *path.parents][:levels]
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    for folder in folders:
        os.chmod(folder, PRIVATE_DIR)
    return path


def private_data_dir(path: Path) -> Path:
    """The data directory made if missing, private (passable only, as root: see PASSABLE_DIR)."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    os.chmod(path, PASSABLE_DIR if os.geteuid() == 0 else PRIVATE_DIR)
    return path


def open_private_log(path: Path, *, levels: int = 1) -> TextIO:
    """`path` open for appending text, private, in a private folder (see `private_dir`)."""
    private_dir(path.parent, levels=levels)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    descriptor = os.open(path, flags, PRIVATE_FILE)
    try:
        os.fchmod(descriptor, PRIVATE_FILE)  # a log made earlier with other modes
        return os.fdopen(descriptor, "a", encoding="utf-8")
    except BaseException:
        os.close(descriptor)
        raise
