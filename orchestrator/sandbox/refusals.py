"""What the sandbox refused a process that did not start, read from what it wrote.

The kernel does not say which rule refused an access; programs say what they were
refused, each in its own words (bash, Python, Node.js). The last refusal a failed
start wrote is the likeliest cause: `refusal` names it, and the option of
`orchestrator mcp add` (or the `sandbox:` key) that allows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orchestrator.sandbox.rules import Policy

# `/x/y: Permission denied` (bash, execve), `[Errno 13] Permission denied: '/x/y'` and
# `can't open file '/x/y': [Errno 13] Permission denied` (Python),
# `EACCES: permission denied, open '/x/y'` (Node.js).
PATH_REFUSED = re.compile(
    r"(?:Permission denied: '(?P<python>/[^']+)')"
    r"|(?:'(?P<script>/[^']+)': \[Errno 13\] Permission denied)"
    r"|(?:EACCES: permission denied, \w+ '(?P<node>/[^']+)')"
    r"|(?:(?P<shell>/[^\s:'\"]+): Permission denied)"
)
# `connect EACCES 127.0.0.1:5432` (Node.js).
PORT_REFUSED = re.compile(r"connect EACCES \S*?:(?P<port>\d{1,5})\b")
ADVICE = (
    "the sandbox refused {what} {target} (allow it: `--{option} {target}` to "
    "`orchestrator mcp add`, or `{option}: [{target}]` in the folder's `sandbox:` section)"
)


@dataclass(frozen=True)
class Refusal:
    """One access the sandbox refused: a path (to read, or to change) or a TCP port."""

    option: str  # read, write or connect: the `mcp add` option and `sandbox:` key
    target: str

    def advice(self) -> str:
        """The refusal and how to allow it, in one clause."""
        what = {"read": "reading", "write": "changing", "connect": "connecting to port"}
        return ADVICE.format(what=what[self.option], target=self.target, option=self.option)


def refusal(output: str, policy: Policy) -> Refusal | None:
    """The last access `output` says was refused; None when it names none.

    A refused path the policy lets it read was refused for a change: `write`.
    """
    found: Refusal | None = None
    position = -1
    for match in PATH_REFUSED.finditer(output):
        path = next(found for found in match.groups() if found)
        option = "write" if _under(path, policy.read) else "read"
        found, position = Refusal(option, path), match.start()
    for match in PORT_REFUSED.finditer(output):
        if match.start() > position:
            found, position = Refusal("connect", match.group("port")), match.start()
    return found


def _under(path: str, allowed: list[str]) -> bool:
    target = Path(path)
    return any(target == Path(root) or Path(root) in target.parents for root in allowed)
