"""The risk level and urgency each action of a folder says at its questions (see `tools.risk`).

The folder's `tool_config.yaml` may say them for every action (`risk_level`,
`urgency`) and per action (`action_risk: {send: {risk_level: critical}}`);
the action's author with `@action(risk_level=..., urgency=...)`. The most
particular wins: the folder's word on the action, then the author's, then
the folder's word on all of its actions. The adapter puts the outcome in
each tool's metadata, which the approval gate reads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

from orchestrator.errors import ToolLoadError
from orchestrator.tools.risk import RISK_KEY, URGENCY_KEY, RiskLevel, Urgency

if TYPE_CHECKING:
    from orchestrator.folders.tool_config import ToolConfig

UNKNOWN_ACTIONS = "{tool}: tool_config.yaml's action_risk names {names}, not an action of it{known}"

Authored = tuple[RiskLevel | None, Urgency | None]


def action_risks(
    tool: str,
    config: ToolConfig | None,
    *,
    known: Collection[str],
    authored: Mapping[str, Authored] | None = None,
) -> dict[str, dict[str, str | None]]:
    """Per action `known`: its metadata's `risk_level` and `urgency` (None: not said).

    Raises ToolLoadError when `action_risk` names an action the tool does not
    have: a typo must not leave the action it meant described as less risky.
    """
    listed = config.action_risk if config is not None else {}
    unknown = [name for name in listed if name not in known]
    if unknown:
        shown = f" (its actions: {', '.join(sorted(known))})" if known else ""
        names = ", ".join(repr(name) for name in unknown)
        raise ToolLoadError(UNKNOWN_ACTIONS.format(tool=tool, names=names, known=shown))
    folder_risk = config.risk_level if config is not None else None
    folder_urgency = config.urgency if config is not None else None
    marks: dict[str, dict[str, str | None]] = {}
    for name in known:
        own = listed.get(name)
        author_risk, author_urgency = (authored or {}).get(name, (None, None))
        marks[name] = {
            RISK_KEY: (own.risk_level if own else None) or author_risk or folder_risk,
            URGENCY_KEY: (own.urgency if own else None) or author_urgency or folder_urgency,
        }
    return marks
