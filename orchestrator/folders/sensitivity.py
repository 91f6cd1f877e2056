"""Which tool calls need the person's decision before they run, and why.

A call needs one when any of these holds:

- its folder's `tool_config.yaml` says `requires_approval: true` (every action of it);
- its author marked the action sensitive: `@action(sensitive=True)`;
- its folder's `tool_config.yaml` lists the action in `sensitive_actions`;
- its MCP server marks the tool destructive (`destructiveHint: true`);
- it is a plan (`create_execution_plan`) of a level whose plans are approved
  (ORCHESTRATOR_APPROVE_PLANS, or `approve_plans: true`);
- its call name matches a sensitive pattern (the setting
  ORCHESTRATOR_SENSITIVE_PATTERNS; by default delete, remove, destroy, drop, purge).

A pattern matches whole segments of the name, split at `_`, `-`, `.` and
camelCase: `delete` matches `files_delete` and `deleteFile` but not
`deleted_items`; `drop_table` matches `db_drop_table`. Built-in tools and tools
given in code have no folder: only their names are matched.

The adapter puts a folder's part of this in each tool's metadata
(`requires_approval`, `sensitive`); the approval gate of the dispatch pipeline
reads it (see `pipeline.approval`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from orchestrator.errors import ToolLoadError

if TYPE_CHECKING:
    from orchestrator.folders.tool_config import ToolConfig
    from orchestrator.tools.base import Tool

DEFAULT_PATTERNS: Final = ("delete", "remove", "destroy", "drop", "purge")
NO_PATTERNS: Final = "none"  # the setting's word for "match no name"

# Who marked an action sensitive: the tool's metadata `sensitive` holds one of these.
BY_AUTHOR: Final = "author"
BY_CONFIG: Final = "tool_config.yaml"
BY_SERVER: Final = "destructiveHint"
BY_PLANNING: Final = "approve_plans"  # a level's plans are approved before they run

WHY_FOLDER = "its folder's tool_config.yaml says requires_approval: true"
WHY_AUTHOR = "its author marked the action sensitive"
WHY_CONFIG = "its folder's tool_config.yaml lists the action in sensitive_actions"
WHY_SERVER = "its MCP server marks it destructive (destructiveHint)"
WHY_PLANNING = (
    "plans are approved before they run (ORCHESTRATOR_APPROVE_PLANS, or approve_plans: true "
    "in the agent's tool_config.yaml)"
)
WHY_PATTERN = "its name matches the sensitive pattern {pattern!r}"
UNKNOWN_ACTIONS = (
    "{tool}: tool_config.yaml's {field} names {names}, not an action of it{known}"
)
CACHED_SENSITIVE = (
    "{tool}: tool_config.yaml's cache.actions names {names}, which its author or server marks "
    "sensitive (it changes things): its results are not cached"
)

_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def segments(name: str) -> tuple[str, ...]:
    """The words of a name, lower case: `files_deleteAll` -> ("files", "delete", "all")."""
    return tuple(part.lower() for part in _SEGMENT.findall(name))


def sensitive_actions(tool: Tool, config: ToolConfig | None) -> dict[str, str]:
    """Who marked each sensitive action of `tool`: `BY_AUTHOR` or `BY_CONFIG`.

    Raises ToolLoadError when `sensitive_actions` names an action the tool
    does not have: a typo must not leave the action it meant unguarded.
    """
    authored = {name: BY_AUTHOR for name, spec in tool.actions.items() if spec.sensitive}
    return marked_actions(tool.name, config, known=tool.actions.keys(), marks=authored)


def marked_actions(
    tool: str, config: ToolConfig | None, *, known: Collection[str], marks: Mapping[str, str]
) -> dict[str, str]:
    """`marks` (by action) plus `BY_CONFIG` for those `config` lists.

    Raises ToolLoadError for a listed name not `known`.
    """
    listed = list(config.sensitive_actions) if config is not None else []
    _known_only(tool, listed, known=known, field="sensitive_actions")
    cached = list(config.cache.actions) if config is not None and config.cache is not None else []
    _known_only(tool, cached, known=known, field="cache.actions")
    if sensitive := [name for name in cached if name in marks]:
        raise ToolLoadError(CACHED_SENSITIVE.format(tool=tool, names=", ".join(map(repr, sensitive))))
    return {**dict.fromkeys(listed, BY_CONFIG), **marks}


def _known_only(tool: str, names: Collection[str], *, known: Collection[str], field: str) -> None:
    if unknown := [name for name in names if name not in known]:
        shown = f" (its actions: {', '.join(sorted(known))})" if known else ""
        listed = ", ".join(repr(name) for name in unknown)
        raise ToolLoadError(UNKNOWN_ACTIONS.format(tool=tool, field=field, names=listed, known=shown))


@dataclass(frozen=True)
class SensitivityRules:
    """Decides whether a call needs the person's decision, and says why."""

    patterns: tuple[tuple[str, ...], ...] = tuple((word,) for word in DEFAULT_PATTERNS)

    @classmethod
    def of(cls, patterns: Iterable[str] | None = None) -> SensitivityRules:
        """Rules for `patterns` (the defaults when None; blank ones are ignored)."""
        if patterns is None:
            return cls()
        return cls(tuple(split for split in map(segments, patterns) if split))

    def why(self, name: str, metadata: Mapping[str, object] | None = None) -> str | None:
        """Why a call of `name` (its tool's `metadata` given) needs a decision; None if not."""
        metadata = metadata or {}
        reasons = []
        if metadata.get("requires_approval"):
            reasons.append(WHY_FOLDER)
        mark = metadata.get("sensitive")
        if mark == BY_AUTHOR:
            reasons.append(WHY_AUTHOR)
        elif mark == BY_CONFIG:
            reasons.append(WHY_CONFIG)
        elif mark == BY_SERVER:
            reasons.append(WHY_SERVER)
        elif mark == BY_PLANNING:
            reasons.append(WHY_PLANNING)
        pattern = self.matching(name)
        if pattern is not None:
            reasons.append(WHY_PATTERN.format(pattern=pattern))
        return "; ".join(reasons) or None

    def matching(self, name: str) -> str | None:
        """The first pattern that matches `name` (as `_`-joined words), if any."""
        words = segments(name)
        for pattern in self.patterns:
            size = len(pattern)
            if any(words[i : i + size] == pattern for i in range(len(words) - size + 1)):
                return "_".join(pattern)
        return None
