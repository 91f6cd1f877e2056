"""What the warm process's code was when it started: a change to it makes a new warm process."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def fingerprint() -> str:
    """The modification times of the import path's folders and of the product's own files.

    Installing, upgrading or removing a package changes its site-packages folder;
    an edit to the product (an editable install) changes one of its files.
    """
    times = hashlib.sha256()
    for entry in sys.path:
        try:
            times.update(f"{entry}\0{os.stat(entry or '.').st_mtime_ns}\0".encode())
        except OSError:
            times.update(f"{entry}\0-\0".encode())
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                times.update(f"{path}\0{os.stat(path).st_mtime_ns}\0".encode())
    return times.hexdigest()
