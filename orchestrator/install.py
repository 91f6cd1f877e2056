"""Install hints that work as printed: the pip of the Python this process runs on.

A bare `pip install X` may reach another Python (the system's, another
virtual environment's) and leave this one without the package, so every hint
names this interpreter's pip: `/path/.venv/bin/python -m pip install X`.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

# `pip install` or `pip3 install`, unless already run through some Python's `-m pip`.
_BARE_PIP = re.compile(r"(?<!-m )\bpip3? install\b")


def this_pip() -> str:
    """`<this python> -m pip`, quoted for a shell."""
    return f"{shlex.quote(sys.executable)} -m pip"


def pip_install(*requirements: str) -> str:
    """The command that installs `requirements` into the environment this process runs in."""
    return " ".join([this_pip(), "install", *(shlex.quote(r) for r in requirements)])


def with_this_pip(text: str) -> str:
    """`text` (a library's message, say) with each bare `pip install` as this environment's."""
    return _BARE_PIP.sub(lambda _: f"{this_pip()} install", text)


def install_extra(extra: str) -> str:
    """The command that adds this package's `extra` to this environment.

    From a source checkout it stays an editable install of that checkout.
    """
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file():
        return pip_install("-e", f"{root}[{extra}]")
    return pip_install(f"orchestrator[{extra}]")
