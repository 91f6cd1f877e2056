"""MCP client sessions: other programs' MCP servers as tool folders, their pinned definitions and LangChain tools.

Not to be confused with `orchestrator.serve.mcp_server`, which serves our tools to MCP clients.
"""
