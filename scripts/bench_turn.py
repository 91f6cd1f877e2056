"""A stored turn, side by side with LangGraph's own agent on the same checkpointer.

    .venv/bin/python scripts/bench_turn.py [--pairs 50] [--count-turns 20]
        [--sessions 50] [--turns 10] [--rounds 2] [--startup-rounds 7]
        [--embeddings auto] [--peer rag] [--only stored,counts,throughput,startup]
        [--detail]

A quick look: `--pairs 20 --count-turns 10 --sessions 10 --turns 5
--startup-rounds 3` (about a minute and a half on two cores).

Both sides run in this process on one embedded PostgreSQL (a fresh cluster in a
temporary directory; each side has a database of its own on it), with the same
zero-latency model (a call of one no-op tool after the user's message, then an
answer) and the same no-op tool, durability `sync` for both:

- ours: `Session.run` of a `Orchestrator` with storage (durable checkpoints through
  our checkpointer, message archive, request log, session leases, RAG
  retrieval before the model), as `orchestrator chat` runs a turn, with the
  product's default settings (the developer's ORCHESTRATOR_* environment and
  .env are ignored). Embeddings as the product's default, `auto`: the local
  model when the `local` extra is installed (it ships the model: nothing is
  downloaded), loaded before measuring, so RAG embeds each turn's query;
  `--embeddings none` turns them off (RAG then searches by words). After each
  timed or counted turn the background embedding of its messages is waited
  for, untimed (its writes and statements are counted); the concurrent runs
  do not wait.
- the peer: `langgraph.prebuilt.create_react_agent` compiled with LangGraph's
  stock `AsyncPostgresSaver` over a psycopg pool of the size ours uses,
  `ainvoke(..., durability="sync")`. By default (`--peer rag`) it has what
  ours adds for RAG, built the way LangGraph documents it, so like is compared
  with like: a `pre_model_hook` that searches LangGraph's
  `AsyncPostgresStore` (same database, indexed with our embedding model, the
  same instance) for the user's five nearest messages of other sessions and
  shows them to the model, and after each turn the user's message and the
  answer put into the store (not awaited by the turn, like our background
  embedding; settled untimed as ours). It needs embeddings on both sides.
  `--peer bare` leaves the peer without retrieval (the agent and checkpointer
  alone): ours then pays for RAG and the peer does not; that is the figure to
  use with `--embeddings none`.

Five warm-up turns each first. Timed and counted turns run in sessions of 10
turns (a session's first turn claims it), the same on both sides. Figures
(one line each, then the last line one JSON object):

- stored_turn_ratio: one stored turn, ours ÷ the peer's, the two alternated
  (which one goes first alternates too); median of `--pairs` paired ratios.
  Target ≤ 1.0. Beside it turn_ms, peer_turn_ms (medians) and
  cpu_ms_per_turn, peer_cpu_ms_per_turn (this process's CPU during the turn:
  the client side, the server's own CPU not included).
- writes_per_turn, peer_writes_per_turn: transactions that wrote, per turn:
  each side runs `--count-turns` turns alone (autovacuum paused) and the
  server's transaction-id counter is read before and after; only a
  transaction that changes or locks a row gets an id, and only those flush the
  WAL at commit (the durable-commit floor). Counted, not timed.
- statements_per_turn, peer_statements_per_turn: statements sent per turn over
  the same turns, counted inside psycopg (below SQLAlchemy and the checkpointer
  alike; see `sql_counts.py`): every statement executed, each parameter set of
  an `executemany` one, plus the BEGIN, COMMIT, ROLLBACK and SAVEPOINT commands
  psycopg sends and SQLAlchemy's pre-pings (the printed line also gives the
  count without those). `--detail` prints each side's statements per turn by
  first keyword and table, and those of a session's second turn in order.
- throughput_ratio: turns/s of `--sessions` concurrent sessions × `--turns`
  turns each (one process, asyncio.gather), ours ÷ the peer's; `--rounds`
  rounds, the order alternating, median of the paired ratios. Target ≥ 1.0.
  lost: a turn's question or answer missing from its session's stored history
  afterwards (the checkpoints, and for ours the message archive too); crossed:
  a message in a session it does not belong to. Both must be 0.
- startup_ratio: CPU seconds (user + system, of the child process) of a
  whole `orchestrator ask hi --json` (offline model, no tool folders, the
  database already running: DATABASE_URL points at this run's server,
  ORCHESTRATOR_EMBEDDINGS=none) ÷ `python -c "import langgraph,
  langchain_openai"`, alternated, median of `--startup-rounds` paired
  ratios. Target ≤ 1.2.

The machine's speed cancels out of every ratio; nothing is asserted. The JSON
line starts with `"peer"`: which peer the figures were measured against.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import PutOp
from langgraph.store.postgres import AsyncPostgresStore
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import text

from orchestrator.conversation.session import Session
from orchestrator.runtime import Orchestrator, use_tool_threads
from orchestrator.settings import Settings, load_settings
from orchestrator.store.embedded import (
    embedded_admin_url,
    embedded_logins,
    leave_embedded_server,
)
from orchestrator.store.embeddings import LocalMiniLMEmbeddings
from orchestrator.store.logins import Logins
from orchestrator.store.rag import HEADER
from orchestrator.store.storage import Storage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_counts import OVERHEAD, autovacuum_paused, counting, next_transaction_id  # noqa: E402  # noqa: E402
from sql_counts import kind as statement_kind

SESSION_TURNS = 10  # turns per session, both sides
WARM_UP_TURNS = 5
PHASES = ("stored", "counts", "throughput", "startup")
IN_PROCESS = {"stored", "counts", "throughput"}
DATABASES = {"ours": "bench_ours", "peer": "bench_peer", "cli": "bench_cli"}
POOL_SIZE = 5  # our checkpoint pool's max_size (store/storage.py)
PEER_IMPORTS = "import langgraph, langchain_openai"
HIDDEN_ENV = ("OPENAI_", "ORCHESTRATOR_", "ANTHROPIC_", "DATABASE_", "LANGSMITH_", "LANGCHAIN_")


class ToolThenAnswer(BaseChatModel):
    """Zero latency: one no-op call after the user's message, then `done: <message>`."""

    @property
    def _llm_type(self) -> str:
        return "tool-then-answer"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            asked = next(m.text for m in reversed(messages) if isinstance(m, HumanMessage))
            reply = AIMessage(content=f"done: {asked}")
        else:
            call = {"name": "noop", "args": {}, "id": f"call_{uuid.uuid4().hex[:24]}"}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


@dataclass
class Side:
    """One system under test: how it runs a turn, reads a session back, and settles after a turn."""

    name: str
    database: str
    turn: Callable[[str, str], Awaitable[object]]
    history: Callable[[str], Awaitable[list[BaseMessage]]]
    archive: Callable[[Sequence[str]], Awaitable[dict[str, list[str]]]] | None = None
    settle: Callable[[], Awaitable[object]] | None = None

    async def timed_turn(self, session_id: str, message: str) -> tuple[float, float]:
        """Wall and CPU seconds of one turn; settling afterwards is not timed."""
        wall, cpu = time.perf_counter(), time.process_time()
        await self.turn(session_id, message)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if self.settle is not None:
            await self.settle()
        return wall, cpu

    async def run_turn(self, prefix: str, number: int) -> None:
        """Turn `number` of a run, in sessions of SESSION_TURNS turns named `prefix` + a number."""
        session_id = f"{prefix}{number // SESSION_TURNS}"
        await self.turn(session_id, f"<{session_id}> turn {number}")
        if self.settle is not None:
            await self.settle()


# --- the two systems ---------------------------------------------------------------------------


async def our_side(logins: Logins, home: Path, embeddings: str) -> tuple[Side, Storage]:
    """Our runtime with storage on the database of `logins`; sessions spread over ten users."""
    settings = load_settings(
        database_url=logins.owner_url,
        database_app_url=logins.app_url,
        data_dir=home / "data",
        sub_graphs_dir=home / "none",
        embeddings=embeddings,
    )
    storage = await Storage.open(settings)
    embedder = storage.embedder
    if embedder is not None and isinstance(embedder.embeddings, LocalMiniLMEmbeddings):
        await asyncio.to_thread(embedder.embeddings.load)  # loading is not a turn's work
    runtime = Orchestrator.create(settings, model=ToolThenAnswer(), tools=[noop], storage=storage)
    sessions: dict[str, Session] = {}

    def session(session_id: str) -> Session:
        if session_id not in sessions:
            sessions[session_id] = runtime.session(user_id=user_of(session_id), session_id=session_id)
        return sessions[session_id]

    async def turn(session_id: str, message: str) -> object:
        return await session(session_id).run(message)

    async def history(session_id: str) -> list[BaseMessage]:
        return await session(session_id).history()

    async def archive(session_ids: Sequence[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {s: [] for s in session_ids}
        # as the owner: every user's rows
        async with storage.database.admin_transaction() as connection:
            rows = await connection.execute(
                text("SELECT session_id, content FROM messages WHERE session_id = ANY(:ids)"),
                {"ids": list(session_ids)},
            )
            for session_id, content in rows:
                found[session_id].append(content)
        return found

    async def settle() -> None:
        if storage.worker is not None:
            await storage.worker.flush(timeout=60)

    side = Side("ours", DATABASES["ours"], turn, history, archive, settle)
    return side, storage


async def peer_side(
    logins: Logins, *, rag_with: Embeddings | None = None
) -> tuple[Side, AsyncConnectionPool]:
    """`create_react_agent` with the stock `AsyncPostgresSaver`, pooled, on `logins`' database.

    With `rag_with`, also RAG through LangGraph's store, embedded with it (see `--peer rag`).
    """
    from langgraph.prebuilt import create_react_agent

    pool = AsyncConnectionPool(
        logins.owner_url,
        min_size=1,
        max_size=POOL_SIZE,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    )
    await pool.open()
    saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
    await saver.setup()
    rag = await StoreRag.open(pool, rag_with) if rag_with is not None else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's
        graph: CompiledStateGraph = create_react_agent(
            ToolThenAnswer(), [noop], checkpointer=saver, pre_model_hook=rag.hook if rag else None
        )

    def config(session_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": session_id}}

    async def turn(session_id: str, message: str) -> object:
        state = await graph.ainvoke(
            {"messages": [HumanMessage(message)]}, config(session_id), durability="sync"
        )
        if rag is not None:
            rag.archive(session_id, [HumanMessage(message), state["messages"][-1]])
        return state

    async def history(session_id: str) -> list[BaseMessage]:
        state = await graph.aget_state(config(session_id))
        return list(state.values.get("messages", []))

    settle = rag.settle if rag is not None else None
    return Side("peer", DATABASES["peer"], turn, history, settle=settle), pool


@dataclass
class StoreRag:
    """The peer's RAG: LangGraph's `AsyncPostgresStore`, searched before the model, fed after."""

    store: AsyncPostgresStore
    pending: set[asyncio.Task[None]]

    @classmethod
    async def open(cls, pool: AsyncConnectionPool, embeddings: Embeddings) -> StoreRag:
        dims = len(await embeddings.aembed_query("dimension probe"))
        store = AsyncPostgresStore(pool, index={"dims": dims, "embed": embeddings, "fields": ["text"]})  # type: ignore[arg-type]
        await store.setup()
        return cls(store, set())

    async def hook(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """The user's nearest messages of other sessions, before the model's first call of a turn."""
        messages = state["messages"]
        context: list[BaseMessage] = []
        if isinstance(messages[-1], HumanMessage):
            session_id = config["configurable"]["thread_id"]
            found = await self.store.asearch(
                ("messages", user_of(session_id)),
                query=messages[-1].text,
                limit=5,
                filter={"session": {"$ne": session_id}},
            )
            if found:
                context = [SystemMessage("\n".join([HEADER, *(f"- {i.value['text']}" for i in found)]))]
        return {"llm_input_messages": [*context, *messages]}

    def archive(self, session_id: str, messages: list[BaseMessage]) -> None:
        """Put the turn's question and answer into the store, beside the next turn."""
        puts = [
            PutOp(("messages", user_of(session_id)), uuid.uuid4().hex, {"text": m.text, "session": session_id})
            for m in messages
        ]
        task = asyncio.ensure_future(self.store.abatch(puts))
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def settle(self) -> None:
        await asyncio.gather(*self.pending)


def user_of(session_id: str) -> str:
    """The user a session belongs to: ten users on both sides."""
    return f"user-{zlib.crc32(session_id.encode()) % 10}"


# --- the figures -------------------------------------------------------------------------------


async def stored_turn(ours: Side, peer: Side, pairs: int) -> dict[str, float]:
    """One turn of each side in turn, `pairs` times; the median of the paired ratios."""
    ratios: list[float] = []
    walls: dict[str, list[float]] = {"ours": [], "peer": []}
    cpus: dict[str, list[float]] = {"ours": [], "peer": []}
    for number in range(pairs):
        order = (ours, peer) if number % 2 == 0 else (peer, ours)
        for side in order:
            session_id = f"st-{side.name}-{number // SESSION_TURNS}"
            wall, cpu = await side.timed_turn(session_id, f"<{session_id}> turn {number}")
            walls[side.name].append(wall)
            cpus[side.name].append(cpu)
        ratios.append(walls["ours"][-1] / walls["peer"][-1])
    figures = {
        "stored_turn_ratio": round(statistics.median(ratios), 2),
        "turn_ms": round(statistics.median(walls["ours"]) * 1000, 1),
        "peer_turn_ms": round(statistics.median(walls["peer"]) * 1000, 1),
        "cpu_ms_per_turn": round(statistics.median(cpus["ours"]) * 1000, 1),
        "peer_cpu_ms_per_turn": round(statistics.median(cpus["peer"]) * 1000, 1),
    }
    print(
        f"stored turn: ours {figures['turn_ms']} ms ({figures['cpu_ms_per_turn']} ms CPU), "
        f"peer {figures['peer_turn_ms']} ms ({figures['peer_cpu_ms_per_turn']} ms CPU); "
        f"median of {pairs} paired ratios {figures['stored_turn_ratio']}"
    )
    return figures


async def counts(
    ours: Side, peer: Side, admin_url: str, turns: int, *, detail: bool
) -> dict[str, float]:
    """Write transactions and statements per turn, each side running alone."""
    figures: dict[str, float] = {}
    with autovacuum_paused(admin_url), counting() as log:
        for side in (ours, peer):
            before = await asyncio.to_thread(next_transaction_id, admin_url)
            marks = [log.count(side.database)]  # where each turn's statements start
            for number in range(turns):
                await side.run_turn(f"count-{side.name}-", number)
                marks.append(log.count(side.database))
            writes = await asyncio.to_thread(next_transaction_id, admin_url) - before
            statements = marks[-1] - marks[0]
            label = "" if side.name == "ours" else "peer_"
            figures[f"{label}writes_per_turn"] = round(writes / turns, 2)
            figures[f"{label}statements_per_turn"] = round(statements / turns, 2)
            sent = log.sent.get(side.database, [])[marks[0] :]
            queries = sum(1 for sql in sent if statement_kind(sql) not in OVERHEAD)
            print(
                f"{side.name}: {writes / turns:.2f} write transactions, "
                f"{statements / turns:.2f} statements "
                f"({queries / turns:.2f} without BEGIN, COMMIT and pre-pings) per turn "
                f"({turns} turns, sessions of {SESSION_TURNS})"
            )
            if detail:
                print_detail(side, sent, marks, turns)
    return figures


def print_detail(side: Side, sent: list[str], marks: list[int], turns: int) -> None:
    """Statements per turn by kind, and those of a session's second turn in order."""
    print(f"{side.name}, statements per turn by kind:")
    kinds = Counter(map(statement_kind, sent))
    for kind, count in sorted(kinds.items(), key=lambda item: (-item[1], item[0])):
        print(f"    {count / turns:6.2f}  {kind}")
    if turns < 2:
        return
    first, second = (mark - marks[0] for mark in marks[1:3])
    print(
        f"{side.name}, a session's first turn: {first} statements; "
        f"its second, in order ({second - first}):"
    )
    for sql in sent[first:second]:
        print(f"    {' '.join(sql.split())[:160]}")


async def throughput(
    ours: Side, peer: Side, sessions: int, turns: int, rounds: int
) -> dict[str, float]:
    """Turns per second of many sessions at once, each side alone, alternating; lost and crossed."""
    rates: dict[str, list[float]] = {"ours": [], "peer": []}
    ratios, lost, crossed = [], 0, 0
    for number in range(rounds):
        order = (ours, peer) if number % 2 == 0 else (peer, ours)
        for side in order:
            prefix = f"r{number}{side.name[0]}"
            rate, side_lost, side_crossed = await concurrent(side, prefix, sessions, turns)
            rates[side.name].append(rate)
            lost += side_lost
            crossed += side_crossed
            print(
                f"{side.name}: {sessions} sessions x {turns} turns at once, {rate:.1f} turns/s, "
                f"lost {side_lost}, crossed {side_crossed}"
            )
        ratios.append(rates["ours"][-1] / rates["peer"][-1])
    return {
        "throughput_ratio": round(statistics.median(ratios), 2),
        "turns_per_s": round(statistics.median(rates["ours"]), 1),
        "peer_turns_per_s": round(statistics.median(rates["peer"]), 1),
        "lost": lost,
        "crossed": crossed,
    }


async def concurrent(side: Side, prefix: str, sessions: int, turns: int) -> tuple[float, int, int]:
    """Turns per second of `sessions` conversations at once; then messages lost and crossed."""
    session_ids = [f"{prefix}s{number}" for number in range(sessions)]

    async def converse(session_id: str) -> None:
        for turn in range(turns):
            await side.turn(session_id, f"<{session_id}> turn {turn}")

    started = time.perf_counter()
    await asyncio.gather(*(converse(s) for s in session_ids))
    rate = sessions * turns / (time.perf_counter() - started)
    if side.settle is not None:
        await side.settle()
    stores = [{s: [m.text for m in await side.history(s)] for s in session_ids}]
    if side.archive is not None:
        stores.append(await side.archive(session_ids))
    lost = crossed = 0
    for store in stores:
        for session_id, texts in store.items():
            for turn in range(turns):
                asked = f"<{session_id}> turn {turn}"
                lost += (asked not in texts) + (f"done: {asked}" not in texts)
            marked = (t for t in texts if t.startswith(("<", "done: <")))
            crossed += sum(1 for t in marked if f"<{session_id}>" not in t)
    return rate, lost, crossed


def startup(logins: Logins, home: Path, rounds: int) -> dict[str, float]:
    """CPU of a whole `ask` ÷ CPU of importing LangGraph and langchain_openai, alternated."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(HIDDEN_ENV)}
    (home / "sub_graphs").mkdir(parents=True, exist_ok=True)
    env |= {
        "ORCHESTRATOR_HOME": str(home),
        "ORCHESTRATOR_SUB_GRAPHS_DIR": str(home / "sub_graphs"),  # no tool folders
        "ORCHESTRATOR_MODEL": "offline",
        "ORCHESTRATOR_EMBEDDINGS": "none",
        "DATABASE_URL": logins.owner_url,
        "DATABASE_APP_URL": logins.app_url,
    }
    ask = [sys.executable, "-m", "orchestrator", "ask", "hi", "--json"]
    imports = [sys.executable, "-c", PEER_IMPORTS]
    child_cpu(ask, env, answer=True)  # warm up both: migrations, bytecode caches
    child_cpu(imports, env)
    ratios, ours, peer = [], [], []
    for number in range(rounds):
        if number % 2 == 0:
            ours.append(child_cpu(ask, env, answer=True))
            peer.append(child_cpu(imports, env))
        else:
            peer.append(child_cpu(imports, env))
            ours.append(child_cpu(ask, env, answer=True))
        ratios.append(ours[-1] / peer[-1])
    figures = {
        "startup_ratio": round(statistics.median(ratios), 2),
        "startup_cpu_s": round(statistics.median(ours), 3),
        "peer_startup_cpu_s": round(statistics.median(peer), 3),
    }
    print(
        f"ask hi --json: {figures['startup_cpu_s']} s CPU; {PEER_IMPORTS}: "
        f"{figures['peer_startup_cpu_s']} s CPU; median of {rounds} paired ratios "
        f"{figures['startup_ratio']}"
    )
    return figures


class ProcessFailed(Exception):
    """A measured process did not do its work; the figure is left out."""


def child_cpu(args: list[str], env: dict[str, str], *, answer: bool = False) -> float:
    """User + system CPU seconds of the whole process `args` (and any it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        args, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or (answer and '"answer"' not in done.stdout):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProcessFailed(f"{' '.join(args[1:])} failed ({done.returncode}): {last}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# --- the run -----------------------------------------------------------------------------------


async def measure_in_process(
    options: argparse.Namespace, logins: dict[str, Logins], admin_url: str, home: Path
) -> dict[str, float]:
    """The figures of the two systems running in this process: turn, counts, throughput."""
    use_tool_threads()
    ours, storage = await our_side(logins["ours"], home, options.embeddings)
    embedder = storage.embedder
    if options.peer == "rag" and embedder is None:
        await storage.close()
        raise SystemExit(
            "The peer's retrieval (--peer rag, the default) needs embeddings on both sides: "
            "install the local extra, or compare with --peer bare."
        )
    rag_with = embedder.embeddings if options.peer == "rag" and embedder is not None else None
    peer, pool = await peer_side(logins["peer"], rag_with=rag_with)
    print(f"embeddings: {options.embeddings} ({'none' if embedder is None else embedder.vectors_name})")
    print(f"peer: create_react_agent{' with RAG through AsyncPostgresStore' if rag_with else ''}")
    figures: dict[str, float] = {}
    try:
        for side in (ours, peer):  # pools filled, caches warm, code paths taken once
            for number in range(WARM_UP_TURNS):
                await side.run_turn(f"warm-{side.name}-", number)
        if "stored" in options.only:
            figures |= await stored_turn(ours, peer, options.pairs)
        if "counts" in options.only:
            turns = options.count_turns
            figures |= await counts(ours, peer, admin_url, turns, detail=options.detail)
        if "throughput" in options.only:
            figures |= await throughput(ours, peer, options.sessions, options.turns, options.rounds)
    finally:
        await storage.close()
        await pool.close()
    return figures


def main() -> None:
    default_embeddings = str(Settings.model_fields["embeddings"].default)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=50, help="stored turns timed, each side")
    parser.add_argument("--count-turns", type=int, default=20, help="turns counted, each side")
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions")
    parser.add_argument("--turns", type=int, default=10, help="turns per concurrent session")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds, alternating")
    parser.add_argument("--startup-rounds", type=int, default=7)
    parser.add_argument("--embeddings", default=default_embeddings, help="ours: auto, local, none")
    parser.add_argument(
        "--peer",
        choices=("rag", "bare"),
        default="rag",
        help="rag: the peer retrieves context as ours does (like with like); bare: it does not",
    )
    parser.add_argument("--only", default=",".join(PHASES), help="some of: " + ",".join(PHASES))
    parser.add_argument("--detail", action="store_true", help="statements per turn by kind")
    options = parser.parse_args()
    if options.peer == "rag" and options.embeddings == "none":
        parser.error("--embeddings none leaves nothing for the peer's retrieval: add --peer bare")
    options.only = set(options.only.split(","))
    for name in [n for n in os.environ if n.startswith(HIDDEN_ENV)]:
        del os.environ[name]  # the product's defaults, not the developer's settings
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as directory:
        home = Path(directory)
        os.environ["ORCHESTRATOR_HOME"] = str(home)  # and not their .env
        try:
            figures = measure(options, home)
        finally:
            leave_embedded_server(home / "server")  # stopped before its directory goes
    print(json.dumps({"peer": options.peer, **figures}))


def measure(options: argparse.Namespace, home: Path) -> dict[str, float | None]:
    """Every figure asked for, on a server of its own under `home`."""
    server = home / "server"
    logins = {side: embedded_logins(server, database=name) for side, name in DATABASES.items()}
    admin_url = embedded_admin_url(server)
    figures: dict[str, float | None] = {}
    if options.only & IN_PROCESS:
        figures |= asyncio.run(measure_in_process(options, logins, admin_url, home))
    if "startup" in options.only:
        try:
            figures |= startup(logins["cli"], home / "cli", options.startup_rounds)
        except ProcessFailed as error:  # the other figures still stand
            print(f"startup: {error}")
            figures["startup_ratio"] = None
    return figures


if __name__ == "__main__":
    main()
