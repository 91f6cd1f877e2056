"""Tool sources: what a level's tools come from (see `ToolSource`)."""
