"""A folder's `requirements.txt`: what it names, and what of it this environment lacks.

The file is read from the bytes that were hashed (what the person approved is what is
installed). Only requirement lines count: comments, blank lines and pip's options
(`-r`, `--index-url`, ...) are left out, and a line that is no requirement is kept as
a problem to show, never guessed at. Nothing here installs anything: see
`orchestrator tools install`.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

MAX_LINES = 500


@dataclass(frozen=True)
class Needed:
    """One requirement and what this environment has of it."""

    requirement: str  # as written (normalised by `packaging`)
    name: str  # the distribution's canonical name
    installed: str | None  # the installed version, None when absent

    @property
    def satisfied(self) -> bool:
        """Installed in a version the requirement accepts."""
        if self.installed is None:
            return False
        wanted = Requirement(self.requirement).specifier
        return wanted.contains(self.installed, prereleases=True)

    def describe(self) -> str:
        """`pypdf>=5 (installed 7.1.0)`, `httpx (missing)` or `x<2 (installed 3.0, not accepted)`."""
        if self.installed is None:
            return f"{self.requirement} (missing)"
        accepted = "" if self.satisfied else ", not accepted"
        return f"{self.requirement} (installed {self.installed}{accepted})"


@dataclass(frozen=True)
class Requirements:
    """The requirements of a folder for this Python, and the lines that are none."""

    needed: tuple[Needed, ...] = ()
    unreadable: tuple[str, ...] = ()

    @property
    def unmet(self) -> list[Needed]:
        """Those missing, or installed in a version they do not accept."""
        return [item for item in self.needed if not item.satisfied]


def read_requirements(data: bytes | None) -> Requirements:
    """What `data` (a `requirements.txt`) asks of this environment; empty for None."""
    if data is None:
        return Requirements()
    needed: list[Needed] = []
    unreadable: list[str] = []
    lines = data.decode("utf-8", errors="replace").splitlines()[:MAX_LINES]
    for line in lines:
        text = line.split(" #", 1)[0].strip()
        if not text or text.startswith(("#", "-")):
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            unreadable.append(text)
            continue
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue  # for another platform or Python
        needed.append(_needed(requirement))
    return Requirements(tuple(needed), tuple(unreadable))


def _needed(requirement: Requirement) -> Needed:
    try:
        installed: str | None = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    return Needed(str(requirement), canonicalize_name(requirement.name), installed)


def providing(module: str, requirements: Requirements) -> Needed | None:
    """The unmet requirement that most likely provides the top-level `module`, if any.

    By name (`pypdf` for `pypdf`, `python-docx`'s `docx` by its last part); with a
    single unmet requirement, that one.
    """
    unmet = requirements.unmet
    key = canonicalize_name(module.partition(".")[0])
    for item in unmet:
        if key in (item.name, item.name.removeprefix("python-"), item.name.removesuffix("-py")):
            return item
    return unmet[0] if len(unmet) == 1 else None
