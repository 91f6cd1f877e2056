"""Reading a web address for a tool: public hosts only (unless allowed), redirects checked hop
by hop, the body read up to a size and never past it.

The one fetch path of the shipped agents that read the web (web_search_agent's pages,
document_analysis_agent's documents at an address): folders cannot import each other's
modules, so it lives here.

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
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from orchestrator.errors import ToolError

SCHEMES = ("http", "https")
CGNAT = ipaddress.ip_network("100.64.0.0/10")  # not `is_private` in every Python version
REDIRECTS = (301, 302, 303, 307, 308)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Fetched:
    """What was read: where the redirects led, the answer's status and type, at most
    `max_bytes` of its body (`cut` when there was more)."""

    url: str
    status: int
    content_type: str
    encoding: str | None
    body: bytes
    cut: bool


def web_client(*, timeout_seconds: float, user_agent: str, accept: str) -> httpx.AsyncClient:
    """A client for `fetch`: redirects are followed by `fetch`, each hop checked; proxies from
    the environment are not used, so the address checked is the address connected to."""
    return httpx.AsyncClient(
        timeout=timeout_seconds,
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": user_agent, "Accept": accept},
    )


async def fetch(
    client: httpx.AsyncClient, url: str, *, allow_private: bool, max_bytes: int, max_redirects: int
) -> Fetched:
    """GET `url`, following at most `max_redirects` redirects, each checked like the first.

    Every failure is a ToolError: `invalid_arguments` (not http(s)), `refused` (a private
    address, HTTP 401/403), `not_found` (HTTP 404/410, an unknown host), `http_error`,
    `too_many_redirects`, `timeout` and `server_unreachable` (both retryable).
    """
    asked = url
    try:
        for _ in range(max_redirects + 1):
            await check_url(url, allow_private=allow_private)
            async with client.stream("GET", url) as response:
                if response.status_code in REDIRECTS and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                _check_status(response, url)
                body, cut = await _read(response, max_bytes)
                kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
                return Fetched(url, response.status_code, kind, response.encoding, body, cut)
    except httpx.HTTPError as error:
        raise unreachable(asked, error) from None
    raise ToolError(f"{url}: more than {max_redirects} redirects", code="too_many_redirects")


def unreachable(where: str, error: httpx.HTTPError) -> ToolError:
    """The ToolError for a server that did not answer (retryable)."""
    if isinstance(error, httpx.TimeoutException):
        return ToolError(f"{where} did not answer in time", code="timeout")
    return ToolError(
        f"Could not reach {where}: {error or type(error).__name__}", code="server_unreachable"
    )


def _check_status(response: httpx.Response, url: str) -> None:
    status = response.status_code
    if status in (404, 410):
        raise ToolError(f"{url}: not found (HTTP {status})", code="not_found", recoverable=False)
    if status in (401, 403):
        raise ToolError(f"{url}: access refused (HTTP {status})", code="refused", recoverable=False)
    if status >= 400:
        raise ToolError(f"{url}: the server answered HTTP {status}", code="http_error")


async def _read(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """At most `max_bytes` of the body; the rest is never downloaded."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


def _blocked(address: Address) -> bool:
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
    """`url` if it may be opened; a ToolError (code `refused`) saying why not otherwise."""
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


async def _addresses(host: str, port: int | None) -> list[Address]:
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
