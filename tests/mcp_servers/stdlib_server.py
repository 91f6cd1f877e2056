"""A stdio MCP server on the standard library alone, for any `python3` (a shim's included).

    python3 stdlib_server.py [FILE...]

It reads each FILE before it answers anything (as a server reads its settings). One tool, `echo`: answers its text, and the interpreter that runs it. Messages are
JSON-RPC, one per line, as the MCP stdio transport sends them.
"""

import json
import sys

TOOL = {
    "name": "echo",
    "description": "Say the text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def answer(method, params):
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdlib-echo", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        text = f"{params['arguments']['text']} (from {sys.executable})"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as file:
        file.read()

for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        result = answer(message.get("method"), message.get("params") or {})
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
