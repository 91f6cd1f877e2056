"""The cyclic collector paused while a command starts, then frozen (see `launch`).

Below every layer, so that the command that finishes starting (`cli.startup`)
can say so without importing the entry point above it.
"""

from __future__ import annotations

import gc

_paused = False


def pause_collection() -> None:
    """Pause the cyclic collector for a command's startup (reference counting goes on)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collection() -> None:
    """Startup is over: what it made is frozen, and the collector runs again. Once."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
