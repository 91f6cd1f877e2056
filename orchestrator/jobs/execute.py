"""One job on a worker: the call from the request log, its folder's trust, then the pipeline.

The call runs through the same dispatch pipeline as every call (request log,
scope, validation, budget, approval, background, usage, timeout and retry), at
the level it was made at, with a run context whose `job` is its request id: the
log then runs it rather than judging it a replay, the approval gate lets it
through as it was decided before the handover, and the background handover
runs it here. Calls it makes below it cannot ask anyone (see `hitl.can_ask`).
Its end goes to the request log as any call's does; the log tells its session.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp

from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.dispatch.middleware import CallRequest
from orchestrator.errors import ToolError
from orchestrator.folders.discovery import ToolFolder, content_hash
from orchestrator.jobs.job import JobArgs
from orchestrator.jobs.queue import GiveBack
from orchestrator.jobs.spool import KeepingLog, ResultSpool
from orchestrator.jobs.trust import approved_contents, refusal, tool_folders
from orchestrator.levels import Limits
from orchestrator.redact import redact
from orchestrator.runtime import Orchestrator
from orchestrator.store.engine import Database
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.storage import Storage
from orchestrator.store.usage_log import session_totals
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.context import RunContext, UserDatabase
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import linked, span
from orchestrator.usage.meter import UsageMeter

logger = logging.getLogger(__name__)

NOT_APPROVED = "not_approved"  # the error code of a refused job
NO_LEVEL = "{name} did not run on worker {worker}: it has no agent {path} to run it at"
ASKED = "the call asked a question, and no one can be asked in a background job: it did not end"
GIVEN_BACK = "its copy of {key} changed since it loaded content {have}, the call's: given back for a worker that holds it"
CHECK_SECONDS = 1.0  # how old a folder's hash, or the database's approval, may be when a job runs


class JobExecutor:
    """Runs jobs' calls with one runtime's tools (loaded at approved contents only).

    `found` is the content hash of each folder this worker has on disk, by
    key, approved or not: a refusal says which content it has.
    """

    def __init__(self, runtime: Orchestrator, *, found: Mapping[str, str], name: str) -> None:
        storage = runtime.storage
        if storage is None:
            raise ValueError("a worker needs the runtime's storage: its jobs are in the database")
        self.runtime = runtime
        self.storage: Storage = storage
        self.found = dict(found)
        self.name = name
        self.jobs = JobRequests(storage.database)
        # A job's end the database cannot take (it is away) is kept until it can (see `spool`).
        spool = ResultSpool.under(runtime.settings.data_dir)
        self.log = KeepingLog(storage.database, spool, checkpoints=storage.requests.checkpoints)
        self._folders = tool_folders(runtime)
        self._levels: dict[tuple[str, ...], Dispatcher | None] = {}
        self._checked = _Checked(storage.database)

    async def run(self, args: JobArgs, *, job_id: int) -> None:
        """Run the job's call, unless it ended already (cancelled before it started, say).

        A job of a content this worker loaded, whose copy here has changed since, is given
        back (`GiveBack`) before anything of it runs: a worker that holds it runs it.
        """
        if (changed := await self._changed_since_loaded(args)) is not None:
            raise GiveBack(GIVEN_BACK.format(key=changed.key, have=changed.digest[:12]))
        call = await self.jobs.take(args.request_id, user_id=args.user_id, job_id=job_id, worker=self.name)
        if call is None:
            logger.info("job %s: request %s has ended already", job_id, args.request_id)
            return
        self.log.jobs.add(call.request_id)
        try:
            await self._run(call, args, job_id=job_id)
        finally:
            self.log.jobs.discard(call.request_id)

    async def _run(self, call: CallRecord, args: JobArgs, *, job_id: int) -> None:
        level = self._level(args.agent_path)
        tool = level.tools.get(call.call_name) if level is not None else None
        why = await self._refusal(call, tool, args) if level is not None else self._no_level(call, args)
        if why is not None:
            logger.warning("job %s refused: %s", job_id, why)
            await self.log.finished(call, _refused(call, why))
            return
        assert level is not None
        attributes = {"orchestrator.request_id": call.request_id, "orchestrator.job_id": job_id}
        # A root of its own (it runs after the turn, maybe elsewhere), linked to the turn's call.
        with span(f"background_job {call.call_name}", attributes, links=linked(args.trace)):
            await self._dispatch(level, call, args, job_id=job_id)

    async def _dispatch(
        self, level: Dispatcher, call: CallRecord, args: JobArgs, *, job_id: int
    ) -> None:
        """The call through its level's pipeline; what escapes it (a crash, a question) ends it failed."""
        try:
            await level.dispatch(await self._request(level, call, args))
        except GraphBubbleUp:
            # The top of a job's run, as a session is of a turn's: no graph above it to pause.
            # (Calls below a job cannot ask: see `hitl.can_ask`; this is a tool's own interrupt.)
            await self.log.finished(call, _failed(call, ASKED, code="no_one_to_ask"))
        except Exception as error:  # the pipeline returns failures as results: this is a bug
            logger.exception("job %s crashed", job_id)
            crashed = redact(f"{call.call_name} crashed: {type(error).__name__}: {error}")
            await self.log.finished(call, _failed(call, crashed, code="crashed"))

    async def _request(self, dispatcher: Dispatcher, call: CallRecord, args: JobArgs) -> CallRequest:
        tool_call = ToolCall(name=call.call_name, args=call.parameters, id=call.request_id)
        request = dispatcher.request(tool_call, await self._context(call, args), record=call)
        return request.override(arguments=dict(args.arguments))

    async def _context(self, call: CallRecord, args: JobArgs) -> RunContext:
        settings = self.runtime.settings
        meter = UsageMeter(prices=settings.price_table, budgets=settings.budgets)
        if settings.max_session_cost_usd is not None and call.session_id is not None:
            database = self.storage.database
            meter.seed(await session_totals(database, call.session_id, user_id=args.user_id))
        meter.start_turn(None)
        return RunContext(
            user_id=args.user_id,
            session_id=call.session_id,
            request_id=call.parent_request_id,
            observer=self.log,
            usage=meter,
            database=UserDatabase(self.storage.database, args.user_id),
            messages=self.storage.messages,
            agent_path=args.agent_path,
            job=call.request_id,
        )

    async def _refusal(self, call: CallRecord, tool: BaseTool | None, args: JobArgs) -> str | None:
        if args.folder is None or args.digest is None:
            return None  # a built-in tool: no folder to trust
        folder = self._folders.get(id(tool)) if tool is not None else None
        loaded = None
        if folder is not None and folder.key == args.folder:
            loaded = await self._checked.content(folder.path)
        return refusal(
            call.call_name,
            key=args.folder,
            want=args.digest,
            loaded=loaded,
            found=self.found.get(args.folder),
            approved=await self._checked.approved(args.folder, args.digest),
        )

    async def stale(self) -> list[ToolFolder]:
        """The folders it loaded whose copy on disk has changed since (hashed at most once a
        second): it no longer holds their content."""
        loaded = {folder.key: folder for folder in self._folders.values() if folder.config.mcp is None}
        return [f for f in loaded.values() if await self._checked.content(f.path) != f.digest]

    async def _changed_since_loaded(self, args: JobArgs) -> ToolFolder | None:
        """The job's folder, if this worker loaded it at the job's content and its copy has
        changed since."""
        loaded = next((f for f in self._folders.values() if f.key == args.folder), None)
        if loaded is None or loaded.digest != args.digest:
            return None
        return loaded if await self._checked.content(loaded.path) != loaded.digest else None

    def _no_level(self, call: CallRecord, args: JobArgs) -> str:
        return NO_LEVEL.format(name=call.call_name, worker=self.name, path=" > ".join(args.agent_path))

    def _level(self, path: tuple[str, ...]) -> Dispatcher | None:
        """The dispatcher of the level at `path` (agents' names from the top); None if this
        worker has no such agent."""
        if path not in self._levels:
            self._levels[path] = self._find_level(path)
        return self._levels[path]

    def _find_level(self, path: tuple[str, ...]) -> Dispatcher | None:
        middleware = self.runtime.middleware
        if not path:
            limits = Limits.from_settings(self.runtime.settings)
            return Dispatcher(self.runtime.tools, limits=limits, middleware=middleware)
        loaded_here = self.runtime.sub_agents
        agent = None
        for name in path:
            agent = next((lt for lt in loaded_here if _agent_named(lt.tool, name)), None)
            if agent is None:
                return None
            loaded_here = agent.children
        assert agent is not None and isinstance(agent.tool, AgentTool)
        limits = agent.level.limits if agent.level is not None else Limits.from_settings(self.runtime.settings)
        return Dispatcher(agent.tool.tools, limits=limits, middleware=middleware)


class _Checked:
    """A folder's content on disk, and whether the database approves a content: each looked at
    again once it is `CHECK_SECONDS` old, so that a busy worker does not hash a folder, nor ask
    the database, for every job (a change or a revocation holds from then on)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._contents: dict[Path, tuple[float, str | None]] = {}
        self._approvals: dict[tuple[str, str], tuple[float, bool]] = {}

    async def content(self, path: Path) -> str | None:
        """The content hash of the folder at `path` now (None: it is gone, or refused)."""
        now = time.monotonic()
        known = self._contents.get(path)
        if known is None or now - known[0] > CHECK_SECONDS:
            known = self._contents[path] = (now, await asyncio.to_thread(_hash_now, path))
        return known[1]

    async def approved(self, key: str, digest: str) -> bool:
        """Whether the database approves `key` at content `digest`."""
        now = time.monotonic()
        known = self._approvals.get((key, digest))
        if known is None or now - known[0] > CHECK_SECONDS:
            approved = (key, digest) in await approved_contents(self.database, [key])
            known = self._approvals[(key, digest)] = (now, approved)
        return known[1]


def _hash_now(path: Path) -> str | None:
    try:
        return content_hash(path)
    except (OSError, ValueError):  # gone, or refused now: no content to run
        return None


def _agent_named(tool: object, name: str) -> bool:
    return isinstance(tool, AgentTool) and tool.name == name


def _refused(call: CallRecord, why: str) -> ToolResult:
    return _failed(call, why, code=NOT_APPROVED)


def _failed(call: CallRecord, message: str, *, code: str) -> ToolResult:
    error = ToolError(message, code=code, recoverable=False)
    return ToolResult.from_error(error).model_copy(
        update={"request_id": call.request_id, "parent_request_id": call.parent_request_id}
    )
