"""What the integration agents' tests share: the shipped folders approved in a test's home, a free port."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from tests.tool_folders import copy_shipped


def approved_copy(cli: Callable[..., object], home: Path, *names: str) -> Path:
    """The shipped folders copied into `home/sub_graphs`, `names` approved there (others left new)."""
    root = copy_shipped(home)
    for name in names:
        done = cli("tools", "approve", name, cwd=home)
        assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    return root


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on (a server that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
