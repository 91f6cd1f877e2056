"""Keeps tests off the network: only loopback and Unix sockets may connect."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from orchestrator.errors import RemoteConnectionBlocked

Address = tuple[str, int] | tuple[str, int, int, int] | str | bytes


def is_local(address: Address) -> bool:
    """True for Unix sockets and loopback addresses."""
    if isinstance(address, str | bytes):
        return True  # a Unix socket path
    host = address[0]
    if host == "localhost":
        return True
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

    socket.socket.connect = guarded  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        socket.socket.connect = original  # type: ignore[method-assign]
