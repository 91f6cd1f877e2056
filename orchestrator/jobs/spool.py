"""A job's result that could not be recorded while the database was away: kept, then recorded once.

A worker whose job ends while its database is unreachable keeps the result, in
memory and in a private file under the data directory (`job-results/`, one file
per request, 0600 in a 0700 folder), and tries again with a doubling backoff
(a line per attempt) until the database answers: the job is then recorded as
it ended, and procrastinate marks it done. Until then it stays running on this
worker, which is alive: no worker of this machine settles it (one of another
machine may, once this one is silent past `worker_stalled_seconds`: the log
then keeps that end, and the kept result is dropped). A worker killed meanwhile
leaves the file: the next worker started on this data directory records it
before it looks for stalled jobs, so the job reads as it ended (and, being
ended, is not run again) rather than as interrupted. The request log keeps a
call's first end: a result kept twice, or recorded by two processes, is written once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator.dispatch.policy import backoff
from orchestrator.private import PRIVATE_FILE, private_dir
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.store.engine import Database, database_problem
from orchestrator.store.requests import RequestLog
from orchestrator.tools.request_log import CallRecord, CallTask
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)

SPOOL_FOLDER = "job-results"
KEPT = "job {request_id}: its result is kept in {path} until the database answers ({why})"
AGAIN = "job {request_id}: recording its result failed (attempt {attempt}; again in {seconds:.1f} s): {why}"
RECORDED = "job {request_id}: its result, kept while the database was away, is recorded"


@dataclass(frozen=True)
class Kept:
    """A job's call and the result it ended with, not yet in the request log."""

    call: CallRecord
    result: ToolResult


class ResultSpool:
    """The kept results of one data directory's workers, a private file each."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def under(cls, data_dir: Path) -> ResultSpool:
        """The spool of the workers of `data_dir`."""
        return cls(data_dir / SPOOL_FOLDER)

    def keep(self, kept: Kept) -> Path:
        """Write `kept` durably (fsync'd, replaced whole); the file it is in."""
        private_dir(self.folder)
        path = self._path(kept.call.request_id)
        body = {"call": asdict(kept.call), "result": kept.result.model_dump(mode="json", exclude_none=True)}
        partial = path.with_suffix(f".{os.getpid()}.part")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
        descriptor = os.open(partial, flags, PRIVATE_FILE)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(body, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
        return path

    def drop(self, request_id: str) -> None:
        """Forget a kept result (recorded now, by this process or another)."""
        self._path(request_id).unlink(missing_ok=True)

    def kept(self) -> list[Kept]:
        """Every result kept here; a file that cannot be read is said in a line and left."""
        if not self.folder.is_dir():
            return []
        found = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
                found.append(Kept(CallRecord(**body["call"]), ToolResult.model_validate(body["result"])))
            except (OSError, ValueError, KeyError, TypeError) as error:
                logger.warning("a kept job result in %s cannot be read: %s: %s", path, type(error).__name__, error)
        return found

    def _path(self, request_id: str) -> Path:
        # Request ids are the model's tool call ids: any other than a plain name is hashed.
        plain = request_id.isascii() and all(c.isalnum() or c in "-_" for c in request_id)
        name = request_id if plain and request_id else hashlib.blake2b(request_id.encode()).hexdigest()
        return self.folder / f"{name}.json"


class KeepingLog(RequestLog):
    """The request log of a worker's jobs: a job's end that the database cannot take is kept
    (see the module) and recorded once it can; every other write is the request log's own.

    `jobs` holds the request ids of the jobs this worker runs now (their calls' ends are kept;
    the ends of the calls they make below them are written, or lost, as anywhere else).
    """

    def __init__(
        self, database: Database, spool: ResultSpool, *, checkpoints: PooledPostgresSaver | None = None
    ) -> None:
        super().__init__(database, checkpoints=checkpoints)
        self.spool = spool
        self.jobs: set[str] = set()

    async def finished(self, call: CallRecord, result: ToolResult, *, task: CallTask | None = None) -> None:
        """Record how the call ended; a job's end waits, kept, until the database takes it."""
        if call.request_id not in self.jobs:
            await super().finished(call, result, task=task)
            return
        why = await self._recorded(call, result)
        if why is None:
            return
        path = await asyncio.to_thread(self.spool.keep, Kept(call, result))
        logger.warning(KEPT.format(request_id=call.request_id, path=path, why=why))
        attempt = 0
        while why is not None:
            attempt += 1
            seconds = backoff(attempt)
            await asyncio.sleep(seconds)
            why = await self._recorded(call, result)
            if why is not None:
                logger.warning(AGAIN.format(request_id=call.request_id, attempt=attempt, seconds=seconds, why=why))
        self.spool.drop(call.request_id)
        logger.warning(RECORDED.format(request_id=call.request_id))

    async def record_kept(self) -> int:
        """Record the results kept by workers of this data directory that stopped; how many.

        One the database cannot take now stays kept (its own worker may still be
        retrying it, or the next start records it).
        """
        recorded = 0
        for kept in await asyncio.to_thread(self.spool.kept):
            why = await self._recorded(kept.call, kept.result)
            if why is not None:
                logger.warning("job %s: its kept result is not recorded yet: %s", kept.call.request_id, why)
                continue
            self.spool.drop(kept.call.request_id)
            logger.warning(RECORDED.format(request_id=kept.call.request_id))
            recorded += 1
        return recorded

    async def _recorded(self, call: CallRecord, result: ToolResult) -> str | None:
        """Write the end; None once written (or refused: the log has an end already), else why not."""
        try:
            await super().finished(call, result)
        except Exception as error:
            why = database_problem(error)
            if why is None:
                raise
            return why
        return None
