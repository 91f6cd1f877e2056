"""The name a model calls a folder's tool by: `<folder>_<tool>`, as function names allow.

One spelling for every source (a folder's actions, a process's, an MCP server's
tools), for what `tools show` prints and for the check a folder's action names pass.
"""

from __future__ import annotations

import re

MAX_FUNCTION_NAME = 64  # what OpenAI-style APIs accept for a function's name
NOT_A_NAME_CHARACTER = re.compile(r"[^A-Za-z0-9_-]")


def qualified_name(folder: str, tool: str) -> str:
    """`<folder>_<tool>`, each other character as `_`, cut to `MAX_FUNCTION_NAME`.

    A folder's own action names already fit (see `fits`); an MCP server's may not.
    """
    return NOT_A_NAME_CHARACTER.sub("_", f"{folder}_{tool}")[:MAX_FUNCTION_NAME]


def fits(folder: str, tool: str) -> bool:
    """True when `<folder>_<tool>` is a function name as it is: nothing replaced, nothing cut."""
    return qualified_name(folder, tool) == f"{folder}_{tool}"
