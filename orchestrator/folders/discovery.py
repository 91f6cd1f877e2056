"""Finds drop-in tool folders and fingerprints them, without importing anything.

A folder is a tool when it holds a `tool_config.yaml`. Its own tools, if it
has any, live in its `src/sub_graphs/`; `discover` looks at one level, and
`discover_tree` walks every level for listing and approval.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from orchestrator.folders.files import kind
from orchestrator.folders.hashing import FolderRefusedError, SourceFile, snapshot
from orchestrator.folders.remote_config import RemoteConfigs, RemoteState
from orchestrator.folders.tool_config import (
    CONFIG_FILE,
    ToolConfig,
    ToolConfigError,
    config_path,
    read_config_mapping,
    validate_tool_config,
)

CHILDREN_DIR = Path("src") / "sub_graphs"


@dataclass(frozen=True)
class ToolFolder:
    """A valid tool folder: where it is, what it declares, and the hash of its files.

    `sources` are its Python files as they were hashed: what the loader imports,
    so the code that runs is the code whose hash was approved.
    """

    path: Path
    key: str  # its path below the top `sub_graphs` directory, e.g. `assistant/src/sub_graphs/mail`
    config: ToolConfig
    digest: str
    sources: Mapping[str, SourceFile] = field(default_factory=dict, repr=False, compare=False)
    # Each file's SHA-256 by its path below the folder: what a later change is listed against.
    files: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    # Its `migrations/*.sql` as they were hashed: what runs is what was approved.
    migrations: Mapping[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    # Its `requirements.txt` as hashed: what approval shows and `tools install` installs.
    requirements: bytes | None = field(default=None, repr=False, compare=False)
    # Its `remote_config:` resolved: which copy `config` is, and what of it approval covers.
    remote: RemoteState | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def depth(self) -> int:
        return self.key.count(CHILDREN_DIR.as_posix() + "/")

    @property
    def children_dir(self) -> Path:
        return self.path / CHILDREN_DIR

    @property
    def remote_digest(self) -> str | None:
        """The hash of the approval-covered parts of its remote copy in force, if it sets any."""
        return self.remote.digest if self.remote is not None else None

    @property
    def content(self) -> str:
        """What its tools are made of: its approved files' hash, and with a remote copy in
        force, that copy too (a remote change of its `config:` changes what a call does)."""
        if self.remote is None:
            return self.digest
        configured = self.digest + "\0" + self.config.model_dump_json()
        return hashlib.sha256(configured.encode("utf-8", "surrogateescape")).hexdigest()

    @property
    def entry(self) -> str:
        """The entry point's path below the folder, as in `sources`."""
        return PurePosixPath(self.config.entry_file).as_posix()


@dataclass(frozen=True)
class Problem:
    """A folder that was skipped, and why."""

    path: Path
    reason: str


@dataclass
class FolderNode:
    """A folder with the tool folders of its own `src/sub_graphs/`."""

    folder: ToolFolder
    children: list[FolderNode] = field(default_factory=list)


@dataclass
class Discovery:
    """What one scan found: usable folders, and the skipped ones with their reasons."""

    nodes: list[FolderNode] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    same_named: list[ToolFolder] = field(default_factory=list)  # every folder sharing a name

    def skip(self, path: Path, reason: str) -> None:
        self.problems.append(Problem(path, reason))


# How strong a folder's claim to its tool name is: 2 approved at its exact path,
# 1 decided on there (changed since, or denied), 0 never decided.
Rank = Callable[[ToolFolder], int]
TIE = (
    "the tool name {name!r} is also that of {others}: none of them is used until "
    "all but one are renamed or removed (`orchestrator tools approve PATH` picks one)"
)


def discover(
    directory: Path,
    *,
    root: Path | None = None,
    prefer: Rank | None = None,
    above: Collection[Path] = (),
    remote: RemoteConfigs | None = None,
) -> Discovery:
    """The tool folders directly inside `directory`; keys are relative to `root`.

    Of several folders with the same tool name, the one `prefer` ranks highest
    is used (at startup: the one decided on at its exact path, never a newcomer
    beside it); when several rank highest, none is, and one line names them
    all. A folder that is one of those `above` (real paths of the folders
    containing `directory`), reached through a link, is skipped: it would
    contain itself. With `remote`, a folder's `remote_config:` is resolved (see
    `remote_config`); without, its file alone is in force.
    """
    found = Discovery()
    root = root or directory
    if not directory.is_dir():
        return found
    folders = [
        folder
        for path in sorted(p for p in directory.iterdir() if is_tool_folder(p))
        if not _contains_itself(path, above=above, found=found)
        and (folder := _inspect(path, root=root, found=found, remote=remote)) is not None
    ]
    rank = prefer or (lambda folder: 0)
    by_name: dict[str, list[ToolFolder]] = {}
    for folder in folders:
        by_name.setdefault(folder.name, []).append(folder)
    for folder in folders:
        _place(folder, by_name[folder.name], rank=rank, root=root, found=found)
    return found


def _place(
    folder: ToolFolder, same: list[ToolFolder], *, rank: Rank, root: Path, found: Discovery
) -> None:
    """Use `folder`, or say why not, given the folders of its level with its name."""
    best = max(rank(other) for other in same)
    top = [other for other in same if rank(other) == best]
    if len(same) > 1:
        found.same_named.append(folder)
    if top == [folder]:
        found.nodes.append(FolderNode(folder))
    elif folder not in top:
        taken = f"{folder.name!r} ({top[0].path.name})" if len(top) == 1 else repr(folder.name)
        found.skip(folder.path, f"another folder here already has the tool name {taken}")
    elif folder is top[0]:  # a tie: one line for them all, at the first
        others = " and ".join(_shown_path(other.path, root) for other in top[1:])
        found.skip(folder.path, TIE.format(name=folder.name, others=others))


def _shown_path(path: Path, root: Path) -> str:
    """`sub_graphs/echo` for a folder below the top `sub_graphs` directory `root`."""
    try:
        return path.relative_to(root.parent).as_posix()
    except ValueError:
        return str(path)


def is_tool_folder(path: Path) -> bool:
    """True for a directory holding a `tool_config.yaml` (at its top, or in `src/config/`).

    Anything by that name counts (a FIFO, a link to a device): reading it then
    says what is wrong with it, instead of the folder passing unnoticed.
    """
    return os.path.lexists(config_path(path))


def discover_tree(
    directory: Path, *, prefer: Rank | None = None, remote: RemoteConfigs | None = None
) -> Discovery:
    """Every level of tool folders below `directory`, each node with its children."""
    top = discover(directory, prefer=prefer, remote=remote)
    pending: list[tuple[FolderNode, tuple[Path, ...]]] = [
        (node, (_real(node.folder.path),)) for node in top.nodes
    ]
    while pending:
        node, above = pending.pop()
        level = discover(
            node.folder.children_dir, root=directory, prefer=prefer, above=above, remote=remote
        )
        node.children = level.nodes
        top.problems.extend(level.problems)
        top.same_named.extend(level.same_named)
        pending.extend((child, (*above, _real(child.folder.path))) for child in level.nodes)
    return top


def _contains_itself(path: Path, *, above: Collection[Path], found: Discovery) -> bool:
    if _real(path) not in above:
        return False
    found.skip(path, "is a link to this tool folder or one containing it, so it would hold itself")
    return True


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def walk(nodes: list[FolderNode]) -> Iterator[FolderNode]:
    """Every node of the tree, parents before children."""
    for node in nodes:
        yield node
        yield from walk(node.children)


def _inspect(
    path: Path, *, root: Path, found: Discovery, remote: RemoteConfigs | None
) -> ToolFolder | None:
    key = path.relative_to(root).as_posix()
    state = None
    try:
        _check_regular(config_path(path))
        # One read: the configuration used is the one in the bytes the digest covers.
        taken = snapshot(path, exclude=child_folders(path))
        if taken.config is None:  # swapped for a directory since it was checked
            raise ToolConfigError(f"{CONFIG_FILE}: not a regular file")
        fields = read_config_mapping(taken.config)
        config = validate_tool_config(fields)
        if config.remote_config is not None and remote is not None:
            config, state = remote.resolve(key, fields, config, config.remote_config)
    except (ToolConfigError, FolderRefusedError) as error:
        found.skip(path, str(error))
        return None
    except OSError as error:
        found.skip(path, f"cannot read its files: {error}")
        return None
    folder = ToolFolder(
        path=path,
        key=key,
        config=config,
        digest=taken.digest,
        sources=taken.sources,
        files=taken.files,
        migrations=taken.migrations,
        requirements=taken.requirements,
        remote=state,
    )
    if folder.entry not in folder.sources and not config.entry_optional:  # YAML-only agents have none
        found.skip(path, f"entry point {config.entry_file} not found")
        return None
    return folder


def _check_regular(config: Path) -> None:
    """A clear reason for a `tool_config.yaml` that is a FIFO, a device, a directory."""
    mode = os.stat(config).st_mode
    if not stat.S_ISREG(mode):
        raise ToolConfigError(f"{CONFIG_FILE} is {kind(mode)}, not a regular file")


def child_folders(folder: Path) -> list[Path]:
    """The tool folders in `folder`'s own `src/sub_graphs/`: approved on their own, not with it."""
    children = folder / CHILDREN_DIR
    return [p for p in children.iterdir() if is_tool_folder(p)] if children.is_dir() else []


def content_hash(folder: Path) -> str:
    """The hash of everything in the folder that could be imported or run (see `hashing`).

    Sub-tools are approved on their own, so a change inside one asks about that
    one only.
    """
    return snapshot(folder, exclude=child_folders(folder)).digest
