"""Tool sources: where a level's tools come from (see `ToolSource`): built-ins, folders, agents, MCP client sessions."""
