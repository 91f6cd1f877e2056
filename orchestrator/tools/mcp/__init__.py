"""MCP servers as tool folders: their sessions, pinned tool definitions and LangChain tools."""
