"""Stamps a document: the example tool folder of `examples/stamp_workflow`."""

from __future__ import annotations

from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Stamp(BaseModel):
    target: str = Field(min_length=1, description="The document's text.")
    mark: str = Field(default="SEEN", description="The mark to put on it.")


class StampAgent(Tool):
    """Stamps documents."""

    @action(Stamp)
    async def stamp(self, params: Stamp, request: ToolRequest) -> ToolResult:
        """Put the mark at the top of the document."""
        stamped = f"[{params.mark}] {params.target}"
        return request.result(
            f"Stamped {len(params.target)} characters with {params.mark}.",
            data={"stamped": stamped, "mark": params.mark, "length": len(params.target)},
        )
