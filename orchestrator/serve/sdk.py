"""The parts of the `mcp` SDK a served process needs: its types, its low-level server, stdio.

The `mcp` package's `__init__` imports the SDK's client (and its HTTP streams), and
`mcp.server`'s imports FastMCP (Starlette, uvicorn): about a fifth of the CPU time
`mcp serve` spent before its first answer, for nothing serving over stdio uses.
Unless imported already, both packages are entered bare (their modules are found
as usual) and run their own `__init__` at the first use of a name only it defines:
`from mcp import ClientSession` works as ever, later, in this process.
"""

from __future__ import annotations

import importlib.util
import sys
import threading


def _enter_bare(name: str) -> None:
    """Put package `name` in `sys.modules` without running its `__init__` until a name of it is used."""
    if name in sys.modules:
        return  # imported whole already
    spec = importlib.util.find_spec(name)
    loader = spec.loader if spec is not None else None
    if spec is None or loader is None:
        return  # not found: the imports below say so
    package = importlib.util.module_from_spec(spec)
    ran = threading.Event()
    running = threading.RLock()  # another thread waits for the whole `__init__`

    def __getattr__(attribute: str) -> object:
        with running:
            if not ran.is_set():  # the first use: from now on names are looked up as usual
                ran.set()
                loader.exec_module(package)
        try:
            return package.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    package.__getattr__ = __getattr__  # pyright: ignore[reportAttributeAccessIssue]  # PEP 562
    sys.modules[name] = package


_enter_bare("mcp")
_enter_bare("mcp.server")

# Their modules, imported only now that the packages are in place (as submodules: `from mcp
# import types` would look the name up on the package, and so run its `__init__`).
import mcp.types as types  # noqa: E402
from mcp.server.lowlevel import Server  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402

__all__ = ["Server", "stdio_server", "types"]
