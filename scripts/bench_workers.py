"""Background jobs on worker processes: scaling from one worker to two, pickup, nothing lost.

    .venv/bin/python scripts/bench_workers.py [--jobs 200] [--seconds 0.1] [--concurrency 4]
        [--pickups 20] [--rounds 2]

Runs on an embedded PostgreSQL of its own (a temporary home), with real
`python -m orchestrator worker` processes and one tool folder, `sleeper`
(`background: true`, `idempotent: true`), whose one action sleeps. Jobs are
made the way `chat` makes them: each call through the dispatch pipeline, its
request logged, handed over to the queue by a `JobRunner` (which, like
`ask --no-wait`, runs none itself).

- scaling_2_workers: jobs per second with two worker processes ÷ with one;
  `--jobs` jobs of `--seconds` sleep, concurrency `--concurrency` each; the
  time from handing the first job over to the last one ended (as the request
  log says); the two set-ups alternate, `--rounds` each, medians compared.
  Target ≥ 1.8. Beside it jobs_per_s_1 and jobs_per_s_2.
- pickup_p50_ms: from handing a call over to its tool starting, on an idle
  worker (the tool notes when it starts); median of `--pickups`. Beside it
  in_process_pickup_p50_ms, the same for a call run as an in-process task
  (the `LocalJobs` that a runtime without the queue uses), and pickup_ratio,
  the one ÷ the other.
- lost: jobs that did not complete when one of two workers is killed (SIGKILL)
  halfway through a run: its jobs must run again on the other. Target 0.
  Beside it requeued, how many jobs the survivor took over.

Last line, one JSON object of these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import yaml
from langchain_core.messages import ToolCall
from sqlalchemy import text

HEARTBEAT_SECONDS = "0.5"  # how often workers look for the jobs of a worker that stopped
SLEEPER = '''
import asyncio
import time
from pathlib import Path

from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

STARTS = Path({starts!r})


class Nap(BaseModel):
    seconds: float = Field(default=0.1, ge=0, le=60)


class Sleeper(Tool):
    @action(Nap)
    async def nap(self, params: Nap, request: ToolRequest) -> ToolResult:
        """Sleep a while."""
        (STARTS / request.request_id).write_text(repr(time.time()))
        await asyncio.sleep(params.seconds)
        return request.result("slept")
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--pickups", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as directory:
        home = Path(directory)
        _prepare_home(home)
        figures = asyncio.run(_bench(home, options))
    print(json.dumps(figures))


def _prepare_home(home: Path) -> None:
    """A home with the sleeper folder, approved, and this process's settings pointing at it."""
    starts = home / "starts"
    starts.mkdir()
    folder = home / "sub_graphs" / "sleeper"
    folder.mkdir(parents=True)
    config = {
        "name": "sleeper", "description": "Sleeps.", "version": "1",
        "background": True, "idempotent": True,
    }
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))
    (folder / "sleeper_tool.py").write_text(SLEEPER.format(starts=str(starts)))
    for name in list(os.environ):  # the caller's own settings must not reach the bench
        if name.startswith(FOREIGN):
            del os.environ[name]
    os.environ.update(_env(home))
    from orchestrator.folders.approvals import ApprovalStore, discover_approved_first
    from orchestrator.folders.discovery import walk
    from orchestrator.settings import load_settings

    settings = load_settings()
    store = ApprovalStore.of(settings)
    for node in walk(discover_approved_first(settings, store).nodes):
        store.decide(node.folder, approved=True)


# Settings of the caller's environment the bench and its workers must not read: every one
# they depend on is set by `_env`, the same for the bench and each process it starts.
FOREIGN = ("ORCHESTRATOR_", "OPENAI_", "DATABASE_", "OTEL_")


def _env(home: Path) -> dict[str, str]:
    return {
        "ORCHESTRATOR_HOME": str(home),
        "ORCHESTRATOR_DATA_DIR": str(home / "data"),
        "ORCHESTRATOR_SUB_GRAPHS_DIR": str(home / "sub_graphs"),
        "XDG_DATA_HOME": str(home / "user-data"),
        "ORCHESTRATOR_EMBEDDINGS": "none",
        "ORCHESTRATOR_MODEL": "offline",
        "ORCHESTRATOR_WORKER_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
        "ORCHESTRATOR_LOG_LEVEL": "WARNING",
    }


def _child_env(home: Path) -> dict[str, str]:
    """A worker's environment: the caller's, without its settings, and the bench's."""
    return {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)} | _env(home)


def _how_ended(ended: dict[str, str], count: int) -> str:
    """What ended how, in one line: `8 jobs: 3 completed, 5 failed, 0 not ended`."""
    outcomes = Counter(ended.values())
    parts = [f"{n} {outcome}" for outcome, n in sorted(outcomes.items())]
    return f"{count} jobs: {', '.join(parts + [f'{count - len(ended)} not ended'])}"


class Bench:
    """The bench process's side: a runtime with the sleeper, its request log, a job runner."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.starts = home / "starts"

    async def open(self) -> None:
        from orchestrator.jobs.runner import JobRunner
        from orchestrator.runtime import Orchestrator, use_tool_threads
        from orchestrator.settings import load_settings
        from orchestrator.store import Storage

        use_tool_threads()
        self.settings = load_settings()
        self.storage = await Storage.open(self.settings, embed_in_background=False)
        self.runtime = Orchestrator.create(
            self.settings, storage=self.storage, ask=lambda folder, status: True
        )
        self.runner = JobRunner(self.runtime, takes_jobs=False)
        self.jobs_runtime = replace(self.runtime, jobs=self.runner)

    async def close(self) -> None:
        await self.runner.close()
        await self.runtime.close()
        await self.storage.close(flush_timeout=0)

    def dispatcher(self):  # noqa: ANN201 (the pipeline, as the graph's tools node builds it)
        from orchestrator.dispatch.dispatcher import Dispatcher
        from orchestrator.levels import Limits

        limits = Limits.from_settings(self.settings)
        return Dispatcher(self.runtime.tools, limits=limits, middleware=self.runtime.middleware)

    def context(self, background: object):  # noqa: ANN201
        from orchestrator.tools.context import RunContext

        return RunContext(
            user_id="bench", session_id=f"bench-{uuid.uuid4().hex[:8]}",
            observer=self.storage.requests, background=background,  # type: ignore[arg-type]
        )

    async def hand_over(self, count: int, *, seconds: float, background: object) -> list[str]:
        """`count` calls of the sleeper through the pipeline, handed to `background`; their ids."""
        dispatcher, context = self.dispatcher(), self.context(background)
        requests = [
            dispatcher.request(
                ToolCall(name="sleeper_nap", args={"seconds": seconds}, id=f"c{n}"), context
            )
            for n in range(count)
        ]
        await asyncio.gather(*(dispatcher.dispatch(request) for request in requests))
        return [request.record.request_id for request in requests]

    async def ended(self, request_ids: list[str]) -> dict[str, str]:
        """The outcome of each of `request_ids` that ended."""
        async with self.storage.database.user_transaction("bench") as connection:
            rows = await connection.execute(
                text(
                    "SELECT request_id, outcome FROM requests "
                    "WHERE request_id = ANY(:ids) AND outcome IS NOT NULL"
                ),
                {"ids": request_ids},
            )
            return {row.request_id: row.outcome for row in rows}

    async def why(self, ended: dict[str, str]) -> str:
        """The first failure's message, as `; first failure: …` (nothing when none failed)."""
        failed = [rid for rid, outcome in ended.items() if outcome != "completed"]
        if not failed:
            return ""
        async with self.storage.database.user_transaction("bench") as connection:
            message = await connection.scalar(
                text("SELECT error ->> 'message' FROM requests WHERE request_id = :r"), {"r": failed[0]}
            )
        return f"; first failure: {message}"

    async def requeued(self, request_ids: list[str]) -> int:
        async with self.storage.database.user_transaction("bench") as connection:
            return await connection.scalar(
                text(
                    "SELECT count(DISTINCT request_id) FROM request_events "
                    "WHERE request_id = ANY(:ids) AND status = 'requeued'"
                ),
                {"ids": request_ids},
            )

    async def until_ended(
        self, request_ids: list[str], *, poll: float = 0.1, deadline: float = 300.0
    ) -> dict[str, str]:
        """Their outcomes, once all ended (or at the deadline). Polled slowly: the last end's
        time comes from the log (`last_end`), so the polling costs the run little."""
        started = time.monotonic()
        while time.monotonic() - started < deadline:
            ended = await self.ended(request_ids)
            if len(ended) == len(request_ids):
                return ended
            await asyncio.sleep(poll)
        return await self.ended(request_ids)

    async def last_end(self, request_ids: list[str]) -> float:
        """When the last of them ended, as the request log recorded it (seconds since the epoch)."""
        async with self.storage.database.user_transaction("bench") as connection:
            return await connection.scalar(
                text(
                    "SELECT extract(epoch FROM max(at)) FROM request_events "
                    "WHERE request_id = ANY(:ids) AND status IN ('completed', 'failed')"
                ),
                {"ids": request_ids},
            )

    def started_at(self, request_id: str) -> float | None:
        path = self.starts / request_id
        return float(path.read_text()) if path.exists() and path.stat().st_size else None


@contextlib.asynccontextmanager
async def workers(home: Path, count: int, *, concurrency: int) -> AsyncIterator[list[subprocess.Popen[bytes]]]:
    """`count` worker processes, once each takes jobs; stopped (Ctrl-C) afterwards."""
    started = []
    for number in range(count):
        log = home / f"worker-{number}-{uuid.uuid4().hex[:6]}.err"
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "worker", "--concurrency", str(concurrency)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log.open("w"),
            cwd=home, env=_child_env(home),
        )
        started.append((process, log))
    try:
        for process, log in started:
            while "folder content(s)" not in log.read_text():
                if process.poll() is not None:
                    raise RuntimeError(f"a worker did not start: {log.read_text()}")
                await asyncio.sleep(0.05)
        yield [process for process, _ in started]
    finally:
        for process, _ in started:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process, _ in started:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


async def throughput(bench: Bench, home: Path, count: int, options: argparse.Namespace) -> float:
    """Jobs per second of `count` workers on `--jobs` jobs."""
    async with workers(home, count, concurrency=options.concurrency) as running:
        cpu = _cpu(running)
        started = time.time()
        ids = await bench.hand_over(options.jobs, seconds=options.seconds, background=bench.runner)
        handed = time.time() - started
        ended = await bench.until_ended(ids)
        elapsed = float(await bench.last_end(ids)) - started
        spent = {name: (after - cpu[name]) * 1000 / options.jobs for name, after in _cpu(running).items()}
    shown = ", ".join(f"{name} {ms:.1f}" for name, ms in spent.items())
    print(f"  handed over in {handed:.2f} s; CPU ms per job: {shown}", file=sys.stderr)
    if list(ended.values()).count("completed") != options.jobs:
        raise RuntimeError(f"not every job completed: {_how_ended(ended, options.jobs)}{await bench.why(ended)}")
    return options.jobs / elapsed


def _cpu(running: list[subprocess.Popen[bytes]]) -> dict[str, float]:
    """CPU seconds so far: the workers, this process, the database server's processes."""
    import psutil

    def seconds(process: psutil.Process) -> float:
        times = process.cpu_times()
        return times.user + times.system

    server = [p for p in psutil.process_iter(["name"]) if p.info["name"] in ("postgres", "postmaster")]
    return {
        "workers": sum(seconds(psutil.Process(p.pid)) for p in running if p.poll() is None),
        "bench": seconds(psutil.Process()),
        "database": sum(seconds(p) for p in server if p.is_running()),
    }


async def pickups(bench: Bench, home: Path, options: argparse.Namespace) -> dict[str, float]:
    """From handing a call over to its tool starting: on an idle worker, and in this process."""
    from orchestrator.conversation.job_board import LocalJobs

    job_ms, task_ms = [], []
    here = LocalJobs()
    async with workers(home, 1, concurrency=options.concurrency):
        for _ in range(options.pickups):
            for background, samples in ((bench.runner, job_ms), (here, task_ms)):
                handed = time.time()
                [request_id] = await bench.hand_over(1, seconds=0, background=background)
                await bench.until_ended([request_id], poll=0.01)
                await here.drain()
                start = bench.started_at(request_id)
                assert start is not None, "the tool did not note its start"
                samples.append((start - handed) * 1000)
    job, task = statistics.median(job_ms), statistics.median(task_ms)
    return {
        "pickup_p50_ms": round(job, 2),
        "in_process_pickup_p50_ms": round(task, 3),
        "pickup_ratio": round(job / task, 1),
    }


async def killed_worker(bench: Bench, home: Path, options: argparse.Namespace) -> dict[str, int]:
    """Jobs lost when one of two workers is killed halfway through a run."""
    async with workers(home, 2, concurrency=options.concurrency) as running:
        ids = await bench.hand_over(options.jobs, seconds=options.seconds, background=bench.runner)
        while len(await bench.ended(ids)) < options.jobs // 2:
            await asyncio.sleep(0.02)
        running[0].send_signal(signal.SIGKILL)
        running[0].wait()
        ended = await bench.until_ended(ids)
    completed = list(ended.values()).count("completed")
    return {"lost": options.jobs - completed, "requeued": await bench.requeued(ids)}


async def _bench(home: Path, options: argparse.Namespace) -> dict[str, object]:
    bench = Bench(home)
    await bench.open()
    try:
        await throughput(bench, home, 1, argparse.Namespace(**{**vars(options), "jobs": 8}))  # warm
        one, two = [], []
        for round_number in range(options.rounds):
            order = (1, 2) if round_number % 2 == 0 else (2, 1)
            for count in order:
                rate = await throughput(bench, home, count, options)
                (one if count == 1 else two).append(rate)
                print(f"{count} worker(s): {rate:.1f} jobs/s", file=sys.stderr)
        figures: dict[str, object] = {
            "scaling_2_workers": round(statistics.median(two) / statistics.median(one), 2),
            "jobs_per_s_1": round(statistics.median(one), 1),
            "jobs_per_s_2": round(statistics.median(two), 1),
        }
        figures |= await pickups(bench, home, options)
        figures |= await killed_worker(bench, home, options)
    finally:
        await bench.close()
    for name, value in figures.items():
        print(f"{name}: {value}", file=sys.stderr)
    return figures


if __name__ == "__main__":
    main()
