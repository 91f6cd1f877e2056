"""Where a level's remote configuration is, and fetching it: HTTPS, bounded, never off its host.

`remote_config: {url, refresh_seconds}` in a folder's `tool_config.yaml` names a
document that overlays the file (see `remote_config`). It can change what the
level may do, so it is read only over HTTPS: plain HTTP only from this machine
(127.0.0.1, ::1, localhost), for tests and a server of one's own. A fetch waits at
most `FETCH_TIMEOUT_SECONDS`, reads at most `MAX_DOCUMENT_BYTES`, and follows a
redirect only to the same host (and never from HTTPS down to HTTP).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.errors import RemoteConfigError

if TYPE_CHECKING:  # httpx is imported to fetch, not to read a tool_config.yaml
    import httpx

LOCAL_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
FETCH_TIMEOUT_SECONDS = 10.0
MAX_DOCUMENT_BYTES = 1024 * 1024  # as a tool_config.yaml
MAX_REDIRECTS = 3
HTTP_OK = 200
DEFAULT_REFRESH_SECONDS = 300
HTTPS_ONLY = "must be an https:// URL (plain http:// only to 127.0.0.1, ::1 or localhost)"


class RemoteConfigRef(BaseModel):
    """`remote_config:` of a folder: the document's URL, and how long a copy is used unfetched."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(description="https://… (http:// only to this machine).")
    refresh_seconds: int = Field(
        default=DEFAULT_REFRESH_SECONDS,
        ge=0,
        le=7 * 24 * 3600,
        description="A copy fetched less than this long ago is used without fetching again.",
    )

    @field_validator("url")
    @classmethod
    def _secure(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            host = parts.hostname
        except ValueError:
            raise ValueError(HTTPS_ONLY) from None
        if not _allowed(parts.scheme, host):
            raise ValueError(HTTPS_ONLY)
        return value


def _allowed(scheme: str, host: str | None) -> bool:
    if not host:
        return False
    return scheme == "https" or (scheme == "http" and host in LOCAL_HOSTS)


def fetch_document(
    url: str, *, timeout: float = FETCH_TIMEOUT_SECONDS, max_bytes: int = MAX_DOCUMENT_BYTES
) -> bytes:
    """The body of `url` (status 200), or a `RemoteConfigError` saying in one line why not."""
    import httpx

    try:
        target = httpx.URL(url)
        # A proxy of the environment, as for any HTTPS; never for this machine.
        local = target.host in LOCAL_HOSTS
        with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=not local) as client:
            return _follow(client, target, max_bytes=max_bytes)
    except httpx.TimeoutException:
        raise RemoteConfigError(f"no answer in {timeout:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise RemoteConfigError(_one_line(f"{type(error).__name__}: {error}")) from None


def _follow(client: httpx.Client, target: httpx.URL, *, max_bytes: int) -> bytes:
    for _ in range(MAX_REDIRECTS + 1):
        with client.stream("GET", target) as response:
            if not response.is_redirect:
                if response.status_code != HTTP_OK:
                    raise RemoteConfigError(f"HTTP {response.status_code}")
                return _bounded(response, max_bytes=max_bytes)
            following = response.next_request
        if (
            following is None
            or following.url.host != target.host
            or not _allowed(following.url.scheme, following.url.host)
        ):
            raise RemoteConfigError("redirected to another host (or to plain HTTP): not followed")
        if target.scheme == "https" and following.url.scheme != "https":
            raise RemoteConfigError("redirected from HTTPS to plain HTTP: not followed")
        target = following.url
    raise RemoteConfigError(f"more than {MAX_REDIRECTS} redirects")


def _bounded(response: httpx.Response, *, max_bytes: int) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > max_bytes:
            raise RemoteConfigError(f"larger than {max_bytes:,} bytes")
    return bytes(body)


def _one_line(text: str) -> str:
    return " ".join(text.split())
