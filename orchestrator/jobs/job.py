"""A job of the queue, as it is written and read: its arguments, and the queue it waits in.

No procrastinate here: `chat` and `ask` name queues and write job arguments
without loading the queue itself (see `queue`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from procrastinate.types import JSONDict

CONTENT_QUEUE = "c.{digest}"  # a folder content's queue: NOTIFY channels name it, 63 bytes at most
HELD = "held"  # jobs of calls that run in the process that made them: never taken


@dataclass(frozen=True)
class JobArgs:
    """What a job holds: a background call of `user_id`, by request id, and how to run it.

    `folder` and `digest` are the key and content hash of the tool's folder as
    the process that made the job loaded it (None for a tool of no folder:
    only its own process runs that); `arguments` those it runs with, without
    the values the folder's configuration fixes.
    """

    request_id: str
    user_id: str
    folder: str | None = None
    digest: str | None = None
    arguments: dict[str, object] = field(default_factory=dict)
    agent_path: tuple[str, ...] = ()
    max_retries: int = 0
    idempotent: bool = False
    trace: str | None = None  # the handing-over call's span (W3C traceparent), when traced

    def to_json(self) -> JSONDict:
        """The job's arguments as the queue stores them (JSON: `arguments` came as JSON)."""
        return {**asdict(self), "agent_path": list(self.agent_path)}

    @classmethod
    def of(cls, values: Mapping[str, object]) -> JobArgs:
        """The arguments of a job as the queue stored them."""
        path = values.get("agent_path") or []
        retries = values.get("max_retries") or 0
        arguments = values.get("arguments") or {}
        return cls(
            request_id=str(values["request_id"]),
            user_id=str(values["user_id"]),
            folder=_text(values.get("folder")),
            digest=_text(values.get("digest")),
            arguments=dict(arguments) if isinstance(arguments, dict) else {},
            agent_path=tuple(str(name) for name in path) if isinstance(path, list) else (),
            max_retries=int(retries) if isinstance(retries, int) else 0,
            idempotent=bool(values.get("idempotent")),
            trace=_text(values.get("trace")),
        )


def content_queue(digest: str) -> str:
    """The queue of the jobs of a folder with content `digest`."""
    return CONTENT_QUEUE.format(digest=digest[:24])


def _text(value: object) -> str | None:
    return None if value is None else str(value)
