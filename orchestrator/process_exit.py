"""Ending the process at once, as its own exit would: for the command line and a warm fork.

Below every layer: the command line (`cli`) and a fork of the warm process
(`warm.child`) both end this way, past what Python's own exit would wait for.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys


def exit_status(code: object) -> int:
    """The exit status `sys.exit(code)` gives: 0 for None, 1 for anything not an int."""
    return code if isinstance(code, int) else 0 if code is None else 1


def exit_now(code: int) -> None:
    """The exit hooks run and the standard streams flushed, then gone (no thread waited for)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
