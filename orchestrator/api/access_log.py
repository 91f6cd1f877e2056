"""One access-log line per request of `orchestrator serve`: who asked what, how it ended.

A JSON object per line on the `orchestrator.access` logger (standard error, as
`serve` sets it up): time, method, path, status, milliseconds, the request id
(the client's `x-request-id` or a new one), the user and key id (never a key),
and the run id when the request made or named a run.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from starlette.types import Scope

from orchestrator.api.identity import Identity

logger = logging.getLogger("orchestrator.access")


@dataclass
class AccessLine:
    """What the line of one request says, filled in as the request goes."""

    method: str
    path: str
    request_id: str
    status: int = 0  # 0: no response started (the client went away first)
    identity: Identity | None = None
    run_id: str | None = None

    @classmethod
    def start(cls, scope: Scope, *, request_id: str) -> AccessLine:
        return cls(scope["method"], scope["path"], request_id)


def log_access(line: AccessLine, *, seconds: float) -> None:
    """Write the request's line."""
    if not logger.isEnabledFor(logging.INFO):
        return
    who = line.identity
    record = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "method": line.method,
        "path": line.path,
        "status": line.status,
        "ms": round(seconds * 1000, 1),
        "request_id": line.request_id,
        "user": who.user_id if who is not None and who.user_id else None,
        "key_id": who.key_id if who is not None and who.key_id else None,
        "run_id": line.run_id,
    }
    logger.info(json.dumps(record, separators=(",", ":")))
