"""Which modules the warm process imports: those the command that started it had loaded.

A command run the long way writes down the modules it ended with that come from
the installation (the standard library, site-packages, the product): what a
command like it needs. Nothing from a tool folder: a folder's code runs only
once its approval is checked, in the command that calls it.
"""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

logger = logging.getLogger(__name__)
PRODUCT = Path(__file__).resolve().parent.parent
FOLDERS = "orchestrator_sub_graphs"  # folders' own package (`folders.importer`), never preloaded


def record(listing: Path) -> None:
    """Write down the installation's modules this process has loaded."""
    roots = tuple({str(Path(root).resolve()) for root in (sys.prefix, sys.base_prefix, PRODUCT)})
    names = [
        name
        for name, module in list(sys.modules.items())
        if "__main__" not in name
        and not name.startswith(FOLDERS)
        and isinstance(getattr(module, "__file__", None), str)
        and str(Path(module.__file__)).startswith(roots)  # pyright: ignore[reportArgumentType]  # checked just above
    ]
    listing.write_text("\n".join(sorted(names)))


def preload(listing: Path) -> None:
    """Import the modules written down; one that does not import alone is left to the command."""
    try:
        names = listing.read_text().split()
    except OSError:
        names = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:
            logger.debug("not preloaded: %s (%s)", name, error)
