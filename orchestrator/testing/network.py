"""Keeps tests off the network: only loopback and Unix sockets may connect."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from orchestrator.errors import RemoteConnectionBlocked

if TYPE_CHECKING:
    from typing import TypeAlias

    from typing_extensions import Buffer  # collections.abc's from Python 3.12

    # What `socket.connect` takes: (host, port, ...) for IP sockets, a path for Unix ones.
    Address: TypeAlias = tuple[object, ...] | str | Buffer


def is_local(address: Address) -> bool:
    """True for Unix sockets and loopback addresses."""
    if not isinstance(address, tuple):
        return True  # a Unix socket path
    host = address[0]
    if host == "localhost":
        return True
    if not isinstance(host, str):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextmanager
def block_remote_connections() -> Iterator[None]:
    """Refuse every connection that leaves the machine, for as long as the block lasts."""
    original = socket.socket.connect

    def guarded(sock: socket.socket, address: Address) -> None:
        if not is_local(address):
            raise RemoteConnectionBlocked(f"tests may not connect to {address!r}")
        original(sock, address)

    socket.socket.connect = guarded
    try:
        yield
    finally:
        socket.socket.connect = original
