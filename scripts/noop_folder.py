"""A tool folder whose one action does nothing: the benches' measure of a call's own cost.

Used by `bench_cli.py` and `bench_overhead.py` (imported from this directory, as
`sql_counts` is).
"""

from __future__ import annotations

from pathlib import Path

import yaml

NOOP_TOOL = '''
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Nothing(BaseModel):
    pass


class Noop(Tool):
    @action(Nothing)
    async def {action}(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Do nothing."""
        return request.result({reply!r})
'''


def write_noop_folder(
    parent: Path,
    name: str,
    *,
    action: str,
    reply: str,
    sandbox: dict[str, object] | None = None,
) -> Path:
    """The folder `parent/name` with a tool of one action, `action`, that answers `reply`."""
    folder = parent / name
    folder.mkdir(parents=True)
    config: dict[str, object] = {"name": name, "description": "Does nothing.", "version": "1"}
    if sandbox is not None:
        config["sandbox"] = sandbox
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))
    (folder / f"{name}_tool.py").write_text(NOOP_TOOL.format(action=action, reply=reply))
    return folder
