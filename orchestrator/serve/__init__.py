"""The orchestrator's own tools served to other programs (`orchestrator mcp serve`).

`mcp_server` builds an MCP server over a runtime's tools, every call going
through the same dispatch pipeline as in a chat; `transports` runs it over
standard input and output or streamable HTTP; `selection` says which tools
are served and which folders were left out.
"""
