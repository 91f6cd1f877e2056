"""The command as the person ran it, written so that it runs as printed from where they are.

Used in the lines that say how to come back to a session: `orchestrator` when
that is what the shell finds, else the path they typed (`.venv/bin/orchestrator`,
`.venv/bin/python -m orchestrator`), relative to the working directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

NAME = "orchestrator"


def command_name() -> str:
    """How to run `orchestrator` again, from the working directory, as it was run this time."""
    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is None:
        return NAME
    if script.name == "__main__.py" and script.parent.name == NAME:  # python -m orchestrator
        return f"{_runnable(Path(sys.executable), 'python')} -m {NAME}"
    if script.name == NAME:
        return _runnable(script, NAME)
    return NAME  # run from code (a test, say): the installed command's name


def _runnable(path: Path, name: str) -> str:
    """`name` if the shell finds this very file by it, else the path to it from here."""
    found = shutil.which(name)
    # Not resolved: a virtual environment's python is a link to the system's one.
    if found is not None and os.path.abspath(found) == os.path.abspath(path):
        return name
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return shlex.quote(str(absolute))
    shown = str(relative) if len(relative.parts) > 1 else f"./{relative}"
    return shlex.quote(shown)
