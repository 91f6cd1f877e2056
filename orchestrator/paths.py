"""Where orchestrator keeps its files when no setting says otherwise.

One *home* directory holds `.env`, `data/` and `sub_graphs/`: `ORCHESTRATOR_HOME`
if set; else the source checkout this package runs from (an editable install,
as `scripts/setup.sh` makes); else the user's data directory
(`~/.local/share/orchestrator` on Linux). Never the current directory by
accident: running from another directory finds the same memory and tools.

The user's data directory is also where the key that signs tool approvals
lives, whatever the home: a home is not trusted to vouch for its own tools.
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
    return _checkout() or user_data_dir()


@cache
def _checkout() -> Path | None:
    root = Path(__file__).resolve().parent.parent
    is_checkout = (root / "pyproject.toml").is_file() and (root / "sub_graphs").is_dir()
    return root if is_checkout else None


def user_data_dir() -> Path:
    """The user's own data directory (`$XDG_DATA_HOME/orchestrator` on Linux)."""
    import platformdirs  # imported when needed: most commands run from a checkout

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
