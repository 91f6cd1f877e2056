"""$name: a drop-in tool for orchestrator."""

from __future__ import annotations

from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class Greet(BaseModel):
    who: str = Field(min_length=1, description="Whom to greet.")


class $class_name(Tool):
    """Replace this example with what your tool does."""

    @action(Greet)
    async def greet(self, params: Greet, request: ToolRequest) -> ToolResult:
        """Greet someone by name (an example action: replace it)."""
        return request.result(f"Hello, {params.who}!", data={"who": params.who})
