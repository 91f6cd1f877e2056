"""`orchestrator serve` against LangGraph's own server (`langgraph dev`), both driven by langgraph-sdk.

    .venv/bin/python scripts/bench_server.py [--clients 50] [--turns 4] [--rounds 4]
        [--samples 15] [--quick] [--peer-only]

Both servers serve the same graph, the orchestrator's as `orchestrator serve` builds
it from the same settings: one no-op tool (a folder the bench writes, `isolation:
inline`, and approves) and one model, a scripted zero-latency OpenAI-compatible
server on 127.0.0.1 (orchestrator.testing's, in a process of its own) that calls the
tool after each user message and then answers `echo: ` and the user's message. Ours
is `orchestrator serve` on a temporary home with its embedded PostgreSQL (threads,
checkpoints, message archive and request log durable; ORCHESTRATOR_EMBEDDINGS=none,
so no embedding model runs, as none runs on the peer), with two users made by
`orchestrator users add` and their keys by `orchestrator users key`, half the
clients on each. Theirs is `langgraph dev` (langgraph-cli[inmem]: threads and
checkpoints in memory) on `server_peer_graph.py`, the same graph without our
storage, `--n-jobs-per-worker` as many as the clients so that its queue does not
hold runs back, `--no-reload`, `--allow-blocking` (blockbuster, a check of `langgraph
dev`'s own that a deployed server does not run, fails the first call of our folder's
tool, which hashes the folder's files). The developer's ORCHESTRATOR_*, OPENAI_*, DATABASE_*,
LANGSMITH_* ... variables reach neither.

Both servers run the whole time; the figures are measured on one, then on the
other, `--rounds` rounds, which goes first alternating, each ratio the median of
the rounds' paired ratios:

- turns_per_s_ratio: turns per second of `--clients` concurrent clients (each its
  own langgraph-sdk client and thread, `--turns` turns of `runs.wait` one after
  another), from the first turn sent to the last answered, ours ÷ theirs; target
  ≥ 1.0. Beside it turns_per_s and peer_turns_per_s (medians), and where the
  time goes: cpu_ms_per_turn, the CPU our server's processes used in the batch
  (`orchestrator serve`, its children, its embedded PostgreSQL's processes) per
  turn, database_cpu_ms_per_turn the database's part of it, and
  peer_cpu_ms_per_turn, `langgraph dev`'s (the process and its children).
- stream_first_event_ratio: from sending `runs.stream` (stream_mode values, on a
  new thread) to its first event (the run's `metadata`), one run at a time, the
  median of `--samples` runs per round; ours ÷ theirs, target ≤ 1.2. Beside it
  stream_first_event_ms and peer_stream_first_event_ms.
- lost: turns whose answer did not come back from `runs.wait` (or the stream), or
  whose message or answer is missing from the thread's state afterwards
  (`threads.get_state`); crossed: another client's message in a thread's state,
  and for ours also another user's thread listed by `threads.search` or readable
  by `threads.get_state` with the other user's key. Target 0 and 0, ours; beside
  them peer_lost and peer_crossed.

`--quick`: 10 clients, 2 turns, 2 rounds, 5 samples. `--peer-only`: the peer's
figures alone (no ratios). A line per round, then the last line one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import APIStatusError, NotFoundError

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))
from noop_folder import write_noop_folder  # noqa: E402

BIN = Path(sys.executable).parent
ASSISTANT = "orchestrator"
TOOL = "noop_nothing"  # the no-op folder's one action, as the model calls it
ECHO = "echo: "
USERS = ("bench-alice", "bench-bob")
# Settings of the caller's environment that must reach neither server.
FOREIGN = (
    "ORCHESTRATOR_",
    "OPENAI_",
    "DATABASE_",
    "OTEL_",
    "LANGSMITH_",
    "LANGCHAIN_",
    "LANGGRAPH_",
)
STARTUP_SECONDS = 180


class BenchFailed(Exception):
    """A server or command the bench needs did not do its work."""


# --- the model: one process, the same for both servers --------------------------------------


def serve_model() -> None:
    """Serves the echoing model until stdin closes; prints its base URL first."""
    from orchestrator.testing import OpenAICompatibleServer
    from orchestrator.testing.openai_server import Reply

    class EchoServer(OpenAICompatibleServer):
        """After a user's message, a call of the no-op tool; after its result, `echo: MESSAGE`."""

        def next_reply(self, request: dict[str, object]) -> Reply | None:
            messages = request.get("messages")
            messages = messages if isinstance(messages, list) else []
            if messages and messages[-1].get("role") == "tool":
                asked = next((m for m in reversed(messages) if m.get("role") == "user"), {})
                return ECHO + _text(asked.get("content"))
            return [(TOOL, {})]

    with EchoServer() as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


def _text(content: object) -> str:
    """A message's text, whether a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@contextlib.contextmanager
def model_server() -> Iterator[str]:
    """The echoing model in its own process (so the clients' loop does not slow it); its URL."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-model"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url:
            raise BenchFailed("the scripted model server did not start")
        yield url
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


# --- the two servers ---------------------------------------------------------------------------


def environment(home: Path, model_url: str) -> dict[str, str]:
    """Both servers' environment: the caller's without its settings, and the bench's."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN)}
    return clean | {
        "ORCHESTRATOR_HOME": str(home),
        "XDG_DATA_HOME": str(home / "user-data"),  # the approvals' signing key
        "XDG_RUNTIME_DIR": str(home / "run"),
        "ORCHESTRATOR_MODEL": "openai:fake",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "bench-key",
        "ORCHESTRATOR_EMBEDDINGS": "none",
        "ORCHESTRATOR_LOG_LEVEL": "WARNING",
        # Half the clients share each key here, where a person's one client would have its
        # own: the limit still counts every request (its cost stays) but never refuses one.
        "ORCHESTRATOR_SERVER_REQUESTS_PER_MINUTE": "1000000",
        "LANGSMITH_TRACING": "false",
    }


def command(args: list[str], env: dict[str, str]) -> str:
    """`orchestrator ARGS`' standard output; BenchFailed with its last line if it fails."""
    done = subprocess.run(
        [str(BIN / "orchestrator"), *args],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [done.stdout.strip() or "no output"])[-1]
        raise BenchFailed(f"orchestrator {' '.join(args)} failed ({done.returncode}): {last}")
    return done.stdout


def prepare(home: Path, env: dict[str, str]) -> None:
    """The home's no-op folder, approved as a person would from a script."""
    (home / "run").mkdir(mode=0o700, parents=True)
    write_noop_folder(
        home / "sub_graphs", "noop", action="nothing", reply="ok", sandbox={"isolation": "inline"}
    )
    command(["tools", "approve", "noop"], env)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class User:
    """How a client says who it is: an API key (ours), or the run's context (the peer's graph
    reads the user from it; `langgraph dev` authenticates no one)."""

    key: str | None = None
    context: dict[str, str] | None = None


@dataclass
class Server:
    """A running server process: its URL, its users, its log."""

    name: str
    url: str
    users: list[User]
    process: subprocess.Popen[bytes]
    log: Path
    database: Path | None = None  # ours: its embedded PostgreSQL's data, whose CPU counts too

    @property
    def authenticates(self) -> bool:
        return any(user.key for user in self.users)

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU seconds so far of the server's processes (its own, its children's, its
        database's), and of its database's alone."""
        postmaster = self.database / "postmaster.pid" if self.database else None
        database = (
            int(postmaster.read_text().split()[0]) if postmaster and postmaster.exists() else None
        )
        server_tree, database_tree = _tree(self.process.pid), _tree(database)
        return _cpu(server_tree | database_tree), _cpu(database_tree)

    def failure(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"


def _tree(pid: int | None) -> dict[int, psutil.Process]:
    """The process `pid` and its descendants, by pid (none if it has ended)."""
    if pid is None:
        return {}
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return {p.pid: p for p in [root, *root.children(recursive=True)]}
    return {}


def _cpu(processes: dict[int, psutil.Process]) -> float:
    total = 0.0
    for process in processes.values():
        with contextlib.suppress(psutil.Error):  # a process that ended meanwhile
            times = process.cpu_times()
            total += times.user + times.system
    return total


def start(
    name: str,
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    port: int,
    users: list[User],
    database: Path | None = None,
) -> Server:
    """The server `args` in a session of its own (stopped whole), its output in `cwd/NAME.log`."""
    log = cwd / f"{name}.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            args,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Server(name, f"http://127.0.0.1:{port}", users, process, log, database)


def start_ours(home: Path, env: dict[str, str]) -> Server:
    """`orchestrator serve` with two users, each with a key of its own."""
    users = []
    for name in USERS:
        command(["users", "add", name], env)
        users.append(User(key=command(["users", "key", name], env).strip()))
    port = free_port()
    args = [str(BIN / "orchestrator"), "serve", "--host", "127.0.0.1", "--port", str(port)]
    database = home / "data" / "pgdata"  # the embedded PostgreSQL's, under the home's data
    return start("ours", args, env=env, cwd=home, port=port, users=users, database=database)


def start_theirs(home: Path, env: dict[str, str], clients: int) -> Server:
    """`langgraph dev` on the peer graph module, its users named in each run's context."""
    project = home / "peer"
    project.mkdir()
    graph = f"{SCRIPTS / 'server_peer_graph.py'}:graph"
    (project / "langgraph.json").write_text(
        json.dumps({"dependencies": ["."], "graphs": {ASSISTANT: graph}})
    )
    port = free_port()
    # --allow-blocking: without it, blockbuster (a check of `langgraph dev`'s alone, not of a
    # deployed server) fails the first call of a folder's tool loaded from its manifest,
    # which hashes the folder's files as the orchestrator does before running it.
    args = [
        *(str(BIN / "langgraph"), "dev", "--no-browser", "--no-reload", "--allow-blocking"),
        *("--port", str(port), "--config", str(project / "langgraph.json")),
        *("--n-jobs-per-worker", str(clients)),
    ]
    users = [User(context={"user_id": name}) for name in USERS]
    return start("theirs", args, env=env, cwd=project, port=port, users=users)


async def until_ready(server: Server) -> None:
    """Until the server answers for its assistant (BenchFailed if it exits or takes too long)."""
    client = get_client(url=server.url, api_key=server.users[0].key)
    deadline = time.monotonic() + STARTUP_SECONDS
    try:
        while True:
            if server.process.poll() is not None:
                raise BenchFailed(f"{server.name}'s server exited: {server.failure()}")
            # Not listening yet, or not ready: asked again until the deadline.
            with contextlib.suppress(Exception):
                found = await client.assistants.search(graph_id=ASSISTANT)
                if any(assistant["graph_id"] == ASSISTANT for assistant in found):
                    return
            if time.monotonic() > deadline:
                raise BenchFailed(f"{server.name}'s server was not ready: {server.failure()}")
            await asyncio.sleep(0.25)
    finally:
        await client.aclose()


def stop(server: Server) -> None:
    """Ctrl-C, as a person stops it; killed if it has not ended after 60 s."""
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGINT)
    try:
        server.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()


# --- the clients -------------------------------------------------------------------------------


@dataclass
class Client:
    """One langgraph-sdk client: its user, its thread, its token (in each of its messages)."""

    number: int
    user: int
    sdk: LangGraphClient
    context: dict[str, str] | None
    token: str = field(default_factory=lambda: f"tok{uuid.uuid4().hex[:16]}")
    thread_id: str = ""
    sent: list[str] = field(default_factory=list)
    answered: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


def clients_of(server: Server, count: int) -> list[Client]:
    """`count` clients, their users in turn."""
    clients = []
    for number in range(count):
        user = server.users[number % len(server.users)]
        sdk = get_client(url=server.url, api_key=user.key)
        clients.append(Client(number, number % len(server.users), sdk, user.context))
    return clients


def user_message(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def answered(values: object, text: str) -> bool:
    """Whether the run's final state ends with the answer to `text`."""
    if not isinstance(values, dict):
        return False
    messages = values.get("messages") or []
    return bool(messages) and (ECHO + text) in _text(messages[-1].get("content"))


async def converse(client: Client, turns: int) -> None:
    """`turns` turns on the client's thread, one after another, each awaited whole."""
    for turn in range(turns):
        text = f"{client.token} turn {turn}"
        client.sent.append(text)
        try:
            values = await client.sdk.runs.wait(
                client.thread_id, ASSISTANT, input=user_message(text), context=client.context
            )
        except Exception as error:  # a turn that failed is counted lost, and the client goes on
            client.errors.append(f"{type(error).__name__}: {error}")
            continue
        if answered(values, text):
            client.answered.add(text)


async def check(server: Server, clients: list[Client]) -> tuple[int, int]:
    """Lost and crossed turns, from each thread's state as its own client reads it."""
    lost = crossed = 0
    tokens = {client.token for client in clients}
    for client in clients:
        state = await client.sdk.threads.get_state(client.thread_id)
        values = state["values"]
        messages = (values.get("messages") if isinstance(values, dict) else None) or []
        asked = [_text(m.get("content")) for m in messages if m.get("type") == "human"]
        answers = [_text(m.get("content")) for m in messages if m.get("type") == "ai"]
        for text in client.sent:
            answer = any(ECHO + text in said for said in answers)
            lost += not (text in client.answered and text in asked and answer)
        seen = " ".join(_text(m.get("content")) for m in messages)
        crossed += sum(token in seen for token in tokens - {client.token})
    if server.authenticates:
        crossed += await across_users(clients)
    return lost, crossed


async def across_users(clients: list[Client]) -> int:
    """Another user's threads that a user's key lists or reads (each should be 404)."""
    crossed = 0
    for client in clients:
        others = [c.thread_id for c in clients if c.user != client.user]
        listed = await client.sdk.threads.search(limit=len(clients) * 2)
        crossed += sum(thread["thread_id"] in others for thread in listed)
        try:
            await client.sdk.threads.get_state(others[client.number % len(others)])
            crossed += 1
        except NotFoundError:
            pass
        except APIStatusError as error:  # refused, but saying the thread exists
            raise BenchFailed(
                f"another user's thread answered {error.status_code}, not 404"
            ) from None
    return crossed


@dataclass
class Batch:
    """One server's figures of one round."""

    turns_per_s: float
    cpu_ms_per_turn: float
    database_cpu_ms_per_turn: float
    first_event_s: float
    lost: int
    crossed: int


async def throughput(server: Server, count: int, turns: int) -> Batch:
    """Turns per second of `count` concurrent clients, the server's CPU per turn, and the
    lost and crossed turns (the first event not measured here)."""
    clients = clients_of(server, count)
    try:
        for client, thread in zip(
            clients, await asyncio.gather(*(c.sdk.threads.create() for c in clients)), strict=True
        ):
            client.thread_id = thread["thread_id"]
        (cpu, database), started = server.cpu_seconds(), time.perf_counter()
        await asyncio.gather(*(converse(client, turns) for client in clients))
        elapsed, (cpu_after, database_after) = time.perf_counter() - started, server.cpu_seconds()
        lost, crossed = await check(server, clients)
        errors = [error for client in clients for error in client.errors]
        if errors:
            print(
                f"  {server.name}: {len(errors)} turn(s) failed, the first: {errors[0]}",
                file=sys.stderr,
            )
        ms_per_turn = 1000 / (count * turns)
        return Batch(
            turns_per_s=count * turns / elapsed,
            cpu_ms_per_turn=(cpu_after - cpu) * ms_per_turn,
            database_cpu_ms_per_turn=(database_after - database) * ms_per_turn,
            first_event_s=0.0,
            lost=lost,
            crossed=crossed,
        )
    finally:
        await asyncio.gather(*(client.sdk.aclose() for client in clients))


async def first_events(server: Server, samples: int) -> tuple[float, int]:
    """The median time to a streamed run's first event, one run at a time; runs not answered."""
    user = server.users[0]
    sdk = get_client(url=server.url, api_key=user.key)
    times: list[float] = []
    lost = 0
    try:
        for sample in range(samples):
            thread = await sdk.threads.create()
            text = f"stream{uuid.uuid4().hex[:12]} sample {sample}"
            started = time.perf_counter()
            first: float | None = None
            last: object = None
            try:
                async for part in sdk.runs.stream(
                    thread["thread_id"],
                    ASSISTANT,
                    input=user_message(text),
                    stream_mode="values",
                    context=user.context,
                ):
                    if first is None:
                        first = time.perf_counter() - started
                    if part.event == "values":
                        last = part.data
            except Exception as error:  # counted lost: its answer never came
                print(f"  {server.name}: a streamed run failed: {error}", file=sys.stderr)
            if first is not None:
                times.append(first)
            lost += not answered(last, text)
    finally:
        await sdk.aclose()
    if not times:
        raise BenchFailed(f"{server.name}: no streamed run sent an event")
    return statistics.median(times), lost


async def batch(server: Server, options: argparse.Namespace) -> Batch:
    done = await throughput(server, options.clients, options.turns)
    first, stream_lost = await first_events(server, options.samples)
    return replace(done, first_event_s=first, lost=done.lost + stream_lost)


# --- the rounds --------------------------------------------------------------------------------


async def measure(servers: list[Server], options: argparse.Namespace) -> dict[str, list[Batch]]:
    """Each server's batches, `--rounds` rounds, which goes first alternating; a warm-up first."""
    for server in servers:
        await until_ready(server)
    warm = argparse.Namespace(clients=min(5, options.clients), turns=1, samples=2)
    for server in servers:
        await batch(server, warm)
    batches: dict[str, list[Batch]] = {server.name: [] for server in servers}
    for number in range(options.rounds):
        for server in servers if number % 2 == 0 else list(reversed(servers)):
            done = await batch(server, options)
            batches[server.name].append(done)
            print(
                f"round {number + 1} {server.name}: {done.turns_per_s:.1f} turns/s "
                f"({done.cpu_ms_per_turn:.0f} CPU ms each), first event "
                f"{done.first_event_s * 1000:.1f} ms, lost {done.lost}, crossed {done.crossed}",
                file=sys.stderr,
                flush=True,
            )
    return batches


def figures(batches: dict[str, list[Batch]]) -> dict[str, float | int]:
    theirs = batches["theirs"]
    peer: dict[str, float | int] = {
        "peer_turns_per_s": round(statistics.median(b.turns_per_s for b in theirs), 1),
        "peer_stream_first_event_ms": round(
            statistics.median(b.first_event_s for b in theirs) * 1000, 1
        ),
        "peer_cpu_ms_per_turn": round(statistics.median(b.cpu_ms_per_turn for b in theirs)),
        "peer_lost": sum(b.lost for b in theirs),
        "peer_crossed": sum(b.crossed for b in theirs),
    }
    if "ours" not in batches:
        return peer
    ours = batches["ours"]
    pairs = list(zip(ours, theirs, strict=True))
    return {
        "turns_per_s_ratio": round(
            statistics.median(a.turns_per_s / b.turns_per_s for a, b in pairs), 2
        ),
        "stream_first_event_ratio": round(
            statistics.median(a.first_event_s / b.first_event_s for a, b in pairs), 2
        ),
        "lost": sum(b.lost for b in ours),
        "crossed": sum(b.crossed for b in ours),
        "turns_per_s": round(statistics.median(b.turns_per_s for b in ours), 1),
        "stream_first_event_ms": round(statistics.median(b.first_event_s for b in ours) * 1000, 1),
        "cpu_ms_per_turn": round(statistics.median(b.cpu_ms_per_turn for b in ours)),
        "database_cpu_ms_per_turn": round(
            statistics.median(b.database_cpu_ms_per_turn for b in ours)
        ),
    } | peer


def run(options: argparse.Namespace, home: Path) -> dict[str, float | int]:
    with model_server() as model_url:
        env = environment(home, model_url)
        prepare(home, env)
        servers: list[Server] = []
        try:
            if not options.peer_only:
                servers.append(start_ours(home, env))
            servers.append(start_theirs(home, env, options.clients))
            return figures(asyncio.run(measure(servers, options)))
        finally:
            for server in servers:
                stop(server)
            if not options.peer_only:
                with contextlib.suppress(BenchFailed):
                    command(["db", "stop"], env)  # before its data directory goes


# The sizes of a run, and of a `--quick` one; an option given explicitly wins over either.
SIZES = {"clients": 50, "turns": 4, "rounds": 4, "samples": 15}
QUICK = {"clients": 10, "turns": 2, "rounds": 2, "samples": 5}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--clients", type=int, help="concurrent clients (50)")
    parser.add_argument("--turns", type=int, help="turns per client and round (4)")
    parser.add_argument("--rounds", type=int, help="rounds per server, alternated (4)")
    parser.add_argument("--samples", type=int, help="streamed runs timed per round (15)")
    parser.add_argument(
        "--quick", action="store_true", help="10 clients, 2 turns, 2 rounds, 5 samples"
    )
    parser.add_argument("--peer-only", action="store_true", help="the peer's figures alone")
    parser.add_argument("--serve-model", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve_model:
        return serve_model()
    for name, size in (QUICK if options.quick else SIZES).items():
        if getattr(options, name) is None:
            setattr(options, name, size)
    with tempfile.TemporaryDirectory(prefix="bench-server-") as directory:
        try:
            result = run(options, Path(directory))
        except BenchFailed as error:
            raise SystemExit(f"bench_server: {error}") from None
    for name, value in result.items():
        print(f"{name}: {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
