"""A small MCP server for the tests, steered through a control directory.

    python fixture_server.py --control DIR [--http]

At startup it appends its process id to DIR/pids (proof that it ran); it
exits with status 3 if DIR/fail exists, never answers if DIR/hang exists,
and waits until the server of the control directory named in DIR/await has
started if there is one. Every call is appended to
DIR/calls.jsonl (proof of what reached it). `echo`'s description is the
text of DIR/description if there is one, so a test can change it between two
starts. Over stdio by default; with `--http`, streamable HTTP on a free port
of 127.0.0.1, written to DIR/port once it listens.
"""

import argparse
import json
import os
import sys
from pathlib import Path

GATE_POLLS = 6000  # of 0.02 s: two minutes at most, so a gate never opened cannot hang a run
# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--http", action="store_true")
    options = parser.parse_args()
    control: Path = options.control
    with (control / "pids").open("a") as pids:  # before anything else: it ran
        pids.write(f"{os.getpid()}\n")
    if (control / "fail").exists():
        print("fixture server: told to fail", file=sys.stderr)
        sys.exit(3)
    if (control / "hang").exists():  # started, but never answers
        wait_for(control / "never")
    if (control / "await").exists():  # serves once another server has started
        wait_for(Path((control / "await").read_text()) / "pids")
    server = build(control)
    if options.http:
        serve_http(server, control / "port")
    else:
        server.run("stdio")


def wait_for(path: Path) -> None:
    """Return once `path` exists (two minutes at most)."""
    import time

    for _ in range(GATE_POLLS):
        if path.exists():
            return
        time.sleep(0.02)


def build(control: Path):
    import anyio
    from mcp.server.fastmcp import Context, FastMCP, Image
    from mcp.types import ToolAnnotations
    from pydantic import BaseModel

    class Billing(BaseModel):
        total_cost_usd: float
        credits: float

    class Bill(BaseModel):
        answer: int
        billing: Billing

    description_file = control / "description"
    description = description_file.read_text() if description_file.exists() else "Repeat the text."
    server = FastMCP("fixture", instructions="A server for the tests.")

    def called(tool: str, **arguments: object) -> None:
        with (control / "calls.jsonl").open("a") as calls:
            calls.write(json.dumps({"tool": tool, "args": arguments}) + "\n")

    @server.tool(description=description)
    def echo(text: str) -> str:
        called("echo", text=text)
        return text

    @server.tool()
    def greet(account: str, text: str) -> str:
        """Greet on behalf of an account."""
        called("greet", account=account, text=text)
        return f"{account} says {text}"

    @server.tool()
    def die() -> str:
        """End the server in the middle of the call."""
        called("die")
        os._exit(1)

    @server.tool()
    def picture() -> Image:
        """Return a tiny image."""
        called("picture")
        return Image(data=PNG, format="png")

    @server.tool()
    def billed() -> Bill:
        """Answer, and say what it cost."""
        called("billed")
        return Bill(answer=42, billing=Billing(total_cost_usd=0.25, credits=3))

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    def erase(path: str) -> str:
        """Erase a path."""
        called("erase", path=path)
        return f"erased {path}"

    @server.tool()
    async def wait(gate: str) -> str:
        """Answer once the file `gate` exists."""
        called("wait", gate=gate)
        for _ in range(GATE_POLLS):
            if Path(gate).exists():
                return "the gate opened"
            await anyio.sleep(0.02)
        return "the gate never opened"

    @server.tool()
    def hold(gate: str) -> str:
        """Block the whole server (a synchronous tool) until the file `gate` exists."""
        called("hold", gate=gate)
        wait_for(Path(gate))
        return "released" if Path(gate).exists() else "never released"

    @server.tool()
    def header(ctx: Context) -> str:
        """The X-Token header of the HTTP request."""
        request = ctx.request_context.request
        return str(request.headers.get("x-token")) if request is not None else "no request"

    return server


def serve_http(server, port_file: Path) -> None:
    import socket

    import uvicorn

    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    # Listening before the port is told: a client that reads it may connect at once.
    written = port_file.with_suffix(".new")
    written.write_text(str(listening.getsockname()[1]))
    written.replace(port_file)  # whole or not at all, for a reader polling it
    app = server.streamable_http_app()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])


if __name__ == "__main__":
    main()
