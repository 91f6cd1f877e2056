"""A request's status, and which status may follow which: the request log enforces it.

    created -> [acknowledged ->] running -> completed | failed | cancelled -> closed

On the way a call may pause (a question for the person) and run again when the
answer comes, or go to the job queue (queued) and run on a worker. A call has
one end, the first: once completed, failed or cancelled it only closes, and a
closed request never changes again. A request closes once it has ended and
every request it caused has closed (`requests.OPEN_CHILDREN` says so once).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class RequestStatus(StrEnum):
    """What a request is doing, as the request log's `status` column holds it."""

    CREATED = "created"
    ACKNOWLEDGED = "acknowledged"  # an inline call gone to the background
    RUNNING = "running"
    PAUSED = "paused"  # waiting for the person's answer (a LangGraph interrupt)
    QUEUED = "queued"  # a job of the queue waiting for a worker
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CLOSED = "closed"  # ended, and everything it caused closed


ENDED: frozenset[RequestStatus] = frozenset(
    {RequestStatus.COMPLETED, RequestStatus.FAILED, RequestStatus.CANCELLED}
)
# While it has not ended a request may run, pause and queue in any order, and again in
# place: a worker takes it, a process requeues it, it asks a second question; it never
# goes back to created or acknowledged.
_ONWARD = frozenset({RequestStatus.RUNNING, RequestStatus.PAUSED, RequestStatus.QUEUED}) | ENDED
TRANSITIONS: Mapping[RequestStatus, frozenset[RequestStatus]] = {
    RequestStatus.CREATED: _ONWARD | {RequestStatus.ACKNOWLEDGED},
    RequestStatus.ACKNOWLEDGED: _ONWARD,
    RequestStatus.RUNNING: _ONWARD,
    RequestStatus.PAUSED: _ONWARD,
    RequestStatus.QUEUED: _ONWARD,
    RequestStatus.COMPLETED: frozenset({RequestStatus.CLOSED}),
    RequestStatus.FAILED: frozenset({RequestStatus.CLOSED}),
    RequestStatus.CANCELLED: frozenset({RequestStatus.CLOSED}),
    RequestStatus.CLOSED: frozenset(),
}


def may_follow(before: RequestStatus, after: RequestStatus) -> bool:
    """Whether a request in status `before` may move to `after`."""
    return after in TRANSITIONS[before]


def preceding(after: RequestStatus) -> list[str]:
    """The statuses a request may be in to move to `after` (for a statement's guard)."""
    return sorted(before.value for before, nexts in TRANSITIONS.items() if after in nexts)
