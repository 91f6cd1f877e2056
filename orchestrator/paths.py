"""Where orchestrator keeps its files when no setting says otherwise.

One *home* directory holds `.env`, `data/` and `sub_graphs/`: `ORCHESTRATOR_HOME`
if set; else the source checkout this package runs from (an editable install,
as `scripts/setup.sh` makes); else the user's data directory
(`~/.local/share/orchestrator` on Linux). Never the current directory by
accident: running from another directory finds the same memory and tools.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

HOME_VARIABLE = "ORCHESTRATOR_HOME"
APP_NAME = "orchestrator"


def home() -> Path:
    """The directory whose `.env`, `data/` and `sub_graphs/` are the defaults."""
    if explicit := os.environ.get(HOME_VARIABLE):
        return Path(explicit).expanduser().resolve()
    return _checkout() or _user_home()


@cache
def _checkout() -> Path | None:
    root = Path(__file__).resolve().parent.parent
    is_checkout = (root / "pyproject.toml").is_file() and (root / "sub_graphs").is_dir()
    return root if is_checkout else None


def _user_home() -> Path:
    import platformdirs  # only installed packages get here

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
