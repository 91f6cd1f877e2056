"""A listening socket for the servers the orchestrator runs (`mcp serve --transport http`, `serve`).

Bound before the server starts: a port in use is one line at once, and clients
that connect before the server accepts wait in the backlog, not refused.
"""

from __future__ import annotations

import socket

from orchestrator.errors import UserError

CANNOT_LISTEN = "Cannot listen on {host} port {port}: {reason}"


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on HOST:PORT (port 0: a free one); UserError when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as error:
        reason = error.strerror or str(error)
        raise UserError(CANNOT_LISTEN.format(host=host, port=port, reason=reason)) from None
