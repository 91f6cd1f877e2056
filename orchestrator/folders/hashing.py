"""The content hash of a tool folder, and the copy of its Python that the hash covers.

What is hashed is everything inside the folder that the loader could import
and more: every file at any depth (`node_modules/`, plain directories in
`src/sub_graphs/`, stray `.pyc` files included), with links followed as long as
they stay inside the folder. Left out: the folder's own sub-tool folders
(approved on their own), the caches tools write when they run (`__pycache__`,
`.pytest_cache`, ...), and the folder's `.git` and `.venv`, which change under
everyday use (`git status` rewrites `.git/index`; a `.venv` links to its Python
outside), and its `.env` (its settings and secrets, which the person edits;
read as settings, never run). The loader never imports from any of them: it imports the `.py`
sources kept here, and a dot-name is no module name. What a tool loads by its
own means (a `.venv`, its own `sys.path` entries, programs it starts) is not
covered by the approval.

Refused, with a reason, because they cannot be hashed or would be imported
without being hashed: links leading out of the folder or in a loop, FIFOs,
sockets and devices, bytecode without its source, and folders too large to read
at every start.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from orchestrator.errors import FolderRefusedError
from orchestrator.folders.files import (
    FileTooLargeError,
    RefusedFileError,
    chunks,
    kind,
    open_regular,
)

# Written by running, testing or working on a tool, never imported by the loader.
IGNORED_DIRS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git", ".venv"}
)
BYTECODE_SUFFIXES = (".pyc", ".pyo")
MAX_FILES = 50_000
MAX_BYTES = 512 * 1024 * 1024
MAX_DEPTH = 40  # directories below the folder
CONFIG_FILE = "tool_config.yaml"  # kept as hashed: it is parsed from these very bytes
# Where it may be: at the folder's top, or in `src/config/` as the Basic Orchestrator seed has it.
CONFIG_PATHS = (CONFIG_FILE, f"src/config/{CONFIG_FILE}")
REQUIREMENTS_FILE = "requirements.txt"  # kept as hashed: shown at approval, installed on a yes
# Settings and secrets the person edits (read as settings, never run): not part of an approval.
UNHASHED_FILES = frozenset({".env"})
MIGRATIONS_DIR = "migrations"  # its `*.sql` are kept as hashed: they run from these very bytes


@dataclass(frozen=True)
class SourceFile:
    """A Python file as it was hashed."""

    path: Path  # on disk: the module's __file__, for tracebacks and the data next to it
    code: bytes


@dataclass(frozen=True)
class Snapshot:
    """A folder's digest, and its `.py` files by their path below it (`pkg/mod.py`).

    `config` is its `tool_config.yaml` as hashed (None if it has none): what is
    parsed is what was approved, never a second read. `files` is each file's own
    SHA-256 by its path, to say which files changed since an approval.
    `migrations` are the `migrations/*.sql` files as hashed, by their path.
    `requirements` is its `requirements.txt` as hashed (None if it has none).
    """

    digest: str
    sources: Mapping[str, SourceFile] = field(repr=False)
    config: bytes | None = field(default=None, repr=False)
    files: Mapping[str, str] = field(default_factory=dict, repr=False)
    migrations: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    requirements: bytes | None = field(default=None, repr=False)


def snapshot(folder: Path, *, exclude: Collection[Path] = ()) -> Snapshot:
    """Hash everything in `folder` but the directories in `exclude`; keep its Python sources."""
    return _Scan(folder, exclude).run()


class _Scan:
    def __init__(self, folder: Path, exclude: Collection[Path]) -> None:
        self.folder = folder
        self.root = Path(os.path.realpath(folder))
        self.exclude = {Path(os.path.realpath(path)) for path in exclude}
        self.digest = hashlib.sha256()
        self.sources: dict[str, SourceFile] = {}
        self.config: bytes | None = None
        self.migrations: dict[str, bytes] = {}
        self.requirements: bytes | None = None
        self.config_at: str | None = None
        self.hashes: dict[str, str] = {}
        self.files = 0
        self.bytes = 0

    def run(self) -> Snapshot:
        self._directory(self.root, PurePosixPath(), above=(self.root,))
        return Snapshot(
            self.digest.hexdigest(),
            self.sources,
            self.config,
            self.hashes,
            self.migrations,
            self.requirements,
        )

    def _directory(self, real: Path, rel: PurePosixPath, *, above: tuple[Path, ...]) -> None:
        if len(rel.parts) > MAX_DEPTH:
            raise FolderRefusedError(f"{rel} is more than {MAX_DEPTH} directories deep")
        with os.scandir(real) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            self._entry(real / name, rel / name, siblings=names, above=above)

    def _entry(
        self, path: Path, rel: PurePosixPath, *, siblings: list[str], above: tuple[Path, ...]
    ) -> None:
        mode = os.lstat(path).st_mode
        if rel.name in IGNORED_DIRS and not stat.S_ISREG(mode):
            return  # wherever it leads: never imported (a `.venv` may be a link)
        if rel.as_posix() in UNHASHED_FILES:
            return  # the folder's own `.env`: its settings, edited without a new approval
        if stat.S_ISLNK(mode):
            path, mode = self._follow(path, rel)
        if stat.S_ISDIR(mode):
            if path in self.exclude:
                return
            if path in above:
                raise FolderRefusedError(f"{rel} is a link to a directory that contains it")
            self._directory(path, rel, above=(*above, path))
        elif stat.S_ISREG(mode):
            self._check_bytecode(rel, siblings)
            self._file(path, rel)
        else:
            raise FolderRefusedError(
                f"{rel} is {kind(mode)}: a tool folder may hold only files, directories "
                "and links to them inside it"
            )

    def _follow(self, link: Path, rel: PurePosixPath) -> tuple[Path, int]:
        target = Path(os.path.realpath(link))
        if not target.is_relative_to(self.root):
            raise FolderRefusedError(f"{rel} is a link leading out of the folder (to {target})")
        try:
            return target, os.stat(target).st_mode
        except OSError:
            raise FolderRefusedError(f"{rel} is a link to nothing ({target})") from None

    def _check_bytecode(self, rel: PurePosixPath, siblings: list[str]) -> None:
        if rel.suffix in BYTECODE_SUFFIXES and f"{rel.stem}.py" not in siblings:
            raise FolderRefusedError(
                f"{rel} is compiled Python without its source, which cannot be reviewed; remove it"
            )

    def _file(self, path: Path, rel: PurePosixPath) -> None:
        self.files += 1
        if self.files > MAX_FILES:
            raise FolderRefusedError(f"more than {MAX_FILES:,} files to hash")
        content = hashlib.sha256()
        kept: list[bytes] = []
        is_config = rel.as_posix() in CONFIG_PATHS
        is_migration = rel.parent.as_posix() == MIGRATIONS_DIR and rel.suffix == ".sql"
        is_requirements = rel.as_posix() == REQUIREMENTS_FILE
        keep = rel.suffix == ".py" or is_config or is_migration or is_requirements
        try:
            with open_regular(path, follow_links=False) as fd:
                for chunk in chunks(fd, limit=MAX_BYTES - self.bytes, name=str(rel)):
                    content.update(chunk)
                    if keep:
                        kept.append(chunk)
                    self.bytes += len(chunk)
        except FileTooLargeError:
            raise FolderRefusedError(f"more than {MAX_BYTES:,} bytes to hash") from None
        except RefusedFileError as error:  # swapped for something else since it was listed
            raise FolderRefusedError(f"{rel}: {error}") from None
        # One entry per file, its name then the hash of its content: no two folders
        # with different files can feed the same bytes to the folder's hash.
        self.digest.update(os.fsencode(rel.as_posix()) + b"\0" + content.digest())
        self.hashes[rel.as_posix()] = content.hexdigest()
        if is_config:
            if self.config_at is not None:
                raise FolderRefusedError(
                    f"both {self.config_at} and {rel.as_posix()} are there: keep one"
                )
            self.config, self.config_at = b"".join(kept), rel.as_posix()
        elif is_requirements:
            self.requirements = b"".join(kept)
        elif is_migration:
            self.migrations[rel.as_posix()] = b"".join(kept)
        elif keep:
            self.sources[rel.as_posix()] = SourceFile(self.folder / rel, b"".join(kept))
