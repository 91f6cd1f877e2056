"""An MCP server that tries what a sandbox may deny, for the sandbox tests.

    python probe_server.py

Each tool tries one thing and says what happened, or fails with the OS's error
(the MCP SDK answers an exception as an error result): the server goes on.
"""

import os
import socket
import tempfile

from mcp.server.fastmcp import FastMCP

app = FastMCP("probe")


@app.tool()
def read(path: str) -> str:
    """Read a text file."""
    with open(path, encoding="utf-8") as file:
        return file.read()


@app.tool()
def write(path: str, text: str) -> str:
    """Write a text file."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
    return "written"


@app.tool()
def connect(port: int) -> str:
    """Connect to a TCP port of 127.0.0.1."""
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        return "connected"


@app.tool()
def hog(megabytes: int) -> str:
    """Hold more and more memory, 64 MB at a time, up to `megabytes`."""
    held = [bytearray(64 * 1024 * 1024) for _ in range(megabytes // 64)]
    return f"held {len(held) * 64} MB"


@app.tool()
def where() -> dict[str, str]:
    """Its HOME and temporary directory, with a file written in each."""
    home, temporary = os.environ["HOME"], tempfile.gettempdir()
    for folder in (home, temporary):
        with open(os.path.join(folder, "probe.txt"), "w", encoding="utf-8") as file:
            file.write("mine")
    return {"home": home, "tmp": temporary, "pid": str(os.getpid())}


@app.tool()
def echo(text: str) -> str:
    """Repeat the text."""
    return text


app.run()
