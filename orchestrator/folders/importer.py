"""Imports a tool folder's Python from the copy that was hashed: not from disk, not from bytecode.

Each folder becomes a package, `orchestrator_sub_graphs.<dir>_<hash of its path>`,
so that its modules import their siblings relatively (`from .helpers import x`)
and two folders never share a module (`ab-x` and `ab_x` included). One finder,
first on `sys.meta_path`, answers every import below `orchestrator_sub_graphs`
from a fixed map of sources: the folder's own `.py` files as they were hashed,
plus those of its approved sub-tools under `src/sub_graphs/<dir>/`. Anything
else is "no module named ...": a denied sub-tool, a file added since approval,
a `.pyc`, `__pycache__`, an extension module. Modules are compiled from those
sources (or taken compiled from a signed cache keyed by those very bytes, see
`code_cache`) and no bytecode is written beside them.

Modules a tool imports by its own means (its own `sys.path` entries) are not
served from here; so that they too are compiled from their source and never
from a `__pycache__` planted beside it, bytecode is kept in a private directory
of the user's (`sys.pycache_prefix`, and `PYTHONPYCACHEPREFIX` for the Python
programs tools start) unless the user has already chosen one.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import linecache
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import CodeType, ModuleType

from orchestrator.folders.code_cache import CodeCache
from orchestrator.folders.hashing import SourceFile
from orchestrator.paths import user_data_dir

PACKAGE = "orchestrator_sub_graphs"
PYCACHE_DIR = "pycache"
PYCACHE_VARIABLE = "PYTHONPYCACHEPREFIX"
# The approved sources compiled at an earlier start, found by their bytes (see `code_cache`).
CODE_CACHE = CodeCache()


def package_name(path: Path) -> str:
    """The package a folder's modules live in: readable, and unique to the folder's path."""
    digest = hashlib.sha256(str(path.absolute()).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{PACKAGE}.{_identifier(path.name)}_{digest[:12]}"


def import_folder(
    package: str, *, root: Path, sources: Mapping[str, SourceFile], entry: str
) -> ModuleType:
    """Serve `sources` (paths below `root`) as `package`, then import the module `entry`.

    Earlier imports of the package are dropped first, so the modules are those of
    `sources` and nothing cached. A failed import leaves no module behind.
    """
    _FINDER.install()
    _private_bytecode()
    forget(package)
    tree = _Tree(root, sources)
    _FINDER.trees[package] = tree
    try:
        with _no_bytecode():
            return importlib.import_module(tree.entry_module(package, entry))
    except BaseException:
        forget(package)
        del _FINDER.trees[package]
        raise


def forget(package: str) -> None:
    """Drop the package and its modules from `sys.modules`."""
    if package not in sys.modules:  # never imported, or forgotten with its modules
        return
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]


def _private_bytecode() -> None:
    """Keep Python's bytecode in a directory only this user can write, not in `__pycache__`."""
    if sys.pycache_prefix is None:
        sys.pycache_prefix = _pycache_dir()
    # Python programs a tool starts read and write theirs there too.
    os.environ.setdefault(PYCACHE_VARIABLE, sys.pycache_prefix)


def _pycache_dir() -> str:
    directory = user_data_dir() / PYCACHE_DIR
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)  # made earlier with other modes: others must not plant in it
        return str(directory)
    except OSError:  # no writable data directory: a fresh private one for this process
        return tempfile.mkdtemp(prefix="orchestrator-pycache-")


def _identifier(text: str) -> str:
    return re.sub(r"\W", "_", text)


@contextmanager
def _no_bytecode() -> Iterator[None]:
    # Modules the folder imports by other means (its own sys.path entries) leave
    # no bytecode behind in it either.
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


class _Tree:
    """The importable files of one package: sources by path, and the directories they imply."""

    def __init__(self, root: Path, sources: Mapping[str, SourceFile]) -> None:
        self.root = root
        self.sources = dict(sources)
        self.dirs = {""} | {p.rpartition("/")[0] for p in sources} | {
            "/".join(p.split("/")[:i]) for p in sources for i in range(1, p.count("/"))
        }
        self.aliases: dict[str, str] = {}  # module path -> file, for entry points named oddly

    def entry_module(self, package: str, entry: str) -> str:
        parts = entry.removesuffix(".py").split("/")
        if all(part.isidentifier() for part in parts):
            return ".".join([package, *parts])
        alias = _identifier(parts[-1])  # `my-tool.py` is imported as `my_tool`
        if f"{alias}.py" in self.sources or alias in self.dirs:
            raise ImportError(f"entry point {entry} would be imported as {alias}, another module")
        self.aliases[alias] = entry
        return f"{package}.{alias}"

    def spec(self, name: str, parts: Sequence[str]) -> ModuleSpec:
        rel = "/".join(parts)
        init = f"{rel}/__init__.py" if rel else "__init__.py"
        if init in self.sources:
            return self._spec(name, self.sources[init], package_dir=rel)
        module = self.aliases.get(rel, f"{rel}.py")
        if rel and module in self.sources:
            return self._spec(name, self.sources[module], package_dir=None)
        if rel in self.dirs:  # a directory without __init__.py: an empty package
            return self._spec(name, None, package_dir=rel)
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    def _spec(self, name: str, source: SourceFile | None, *, package_dir: str | None) -> ModuleSpec:
        is_package = package_dir is not None
        spec = ModuleSpec(
            name,
            _SourceLoader(source, is_package=is_package),
            origin=str(source.path) if source else None,
            is_package=is_package,
        )
        spec.has_location = source is not None
        if package_dir is not None:
            # Where its data files are; submodules are still found by the finder only.
            spec.submodule_search_locations = [str(self.root / package_dir)]
        return spec


class _SourceLoader(Loader):
    """Runs one module from the hashed source; no bytecode read or written."""

    def __init__(self, source: SourceFile | None, *, is_package: bool) -> None:
        self.source = source
        self._is_package = is_package

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.get_code(module.__name__), module.__dict__)  # noqa: S102 - the approved code

    def get_code(self, fullname: str) -> CodeType:
        if self.source is None:
            return compile("", f"<package {fullname}>", "exec")
        filename = str(self.source.path)
        # Tracebacks quote the approved lines, not what is on disk now.
        lines = self.get_source(fullname).splitlines(keepends=True)
        linecache.cache[filename] = (len(self.source.code), None, lines, filename)
        return CODE_CACHE.code(self.source.code, filename)

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self.source.code) if self.source else ""

    def is_package(self, fullname: str) -> bool:
        return self._is_package


class _FolderFinder(MetaPathFinder):
    """Answers every import below `PACKAGE`, from the mounted trees only."""

    def __init__(self) -> None:
        self.trees: dict[str, _Tree] = {}

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == PACKAGE:
            return ModuleSpec(PACKAGE, _SourceLoader(None, is_package=True), is_package=True)
        if not fullname.startswith(PACKAGE + "."):
            return None
        parts = fullname.split(".")
        tree = self.trees.get(".".join(parts[:2]))
        if tree is None:  # never fall through to the path finders: they read any file
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return tree.spec(fullname, parts[2:])


_FINDER = _FolderFinder()
