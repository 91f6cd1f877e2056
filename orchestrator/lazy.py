"""Package attributes imported on first use, so that the command line starts quickly."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` that imports `exports[name]` (a module) when `name` is first used."""

    def __getattr__(name: str) -> object:
        if name in exports:
            return getattr(import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
