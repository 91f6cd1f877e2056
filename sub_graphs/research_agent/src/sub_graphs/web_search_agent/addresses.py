"""Which hosts fetch_page may reach: public addresses only, unless the folder allows private ones.

A page's address is resolved and every address it resolves to is checked (a name
pointing at 127.0.0.1 is as local as 127.0.0.1), at every redirect. Refused:
loopback, private (RFC 1918, unique local), link-local (a cloud's metadata service
at 169.254.169.254 included), carrier-grade NAT, multicast, reserved and
unspecified addresses, and IPv4 written inside IPv6.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from orchestrator.tools import ToolError

SCHEMES = ("http", "https")
CGNAT = ipaddress.ip_network("100.64.0.0/10")  # not `is_private` in every Python version


def _blocked(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _blocked(address.ipv4_mapped)
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv4Address) and address in CGNAT)
    )


async def check_url(url: str, *, allow_private: bool) -> str:
    """`url` if fetch_page may open it; a ToolError (code `refused`) saying why not otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ToolError(
            f"Only http and https pages can be fetched, not {url!r}.", code="invalid_arguments"
        )
    if allow_private:
        return url
    for address in await _addresses(parts.hostname, parts.port):
        if _blocked(address):
            raise ToolError(
                f"Refused to fetch {url}: {parts.hostname} is a private or local address "
                f"({address}). The folder's config allows such addresses only with "
                "allow_private_addresses: true.",
                code="refused",
                recoverable=False,
            )
    return url


async def _addresses(
    host: str, port: int | None
) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        found = await asyncio.get_running_loop().getaddrinfo(
            host, port or 443, type=socket.SOCK_STREAM
        )
    except OSError as error:
        raise ToolError(f"Cannot resolve {host}: {error}", code="not_found") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]
