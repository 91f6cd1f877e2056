"""Request states are a type: one transition table, which the real request log enforces."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable

import pytest

from orchestrator.store import Database
from orchestrator.store.job_requests import JobRequests
from orchestrator.store.requests import RequestLog, request_history, request_tree
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.request_status import ENDED, TRANSITIONS, RequestStatus, may_follow
from orchestrator.tools.results import ToolResult

S = RequestStatus


def test_the_transition_table_covers_every_status():
    assert set(TRANSITIONS) == set(RequestStatus)
    assert all(set(nexts) <= set(RequestStatus) for nexts in TRANSITIONS.values())
    # Every status can be reached from the first, and every path ends closed.
    reached, frontier = {S.CREATED}, [S.CREATED]
    while frontier:
        for after in TRANSITIONS[frontier.pop()] - reached:
            reached.add(after)
            frontier.append(after)
    assert reached == set(RequestStatus)
    assert TRANSITIONS[S.CLOSED] == frozenset()
    assert all(TRANSITIONS[ended] == {S.CLOSED} for ended in ENDED)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (S.FAILED, S.COMPLETED),
        (S.CANCELLED, S.COMPLETED),
        (S.COMPLETED, S.FAILED),
        (S.COMPLETED, S.RUNNING),
        (S.COMPLETED, S.PAUSED),
        (S.FAILED, S.QUEUED),
        (S.CLOSED, S.RUNNING),
        (S.CLOSED, S.CANCELLED),
        (S.RUNNING, S.CREATED),
        (S.QUEUED, S.ACKNOWLEDGED),
        (S.RUNNING, S.CLOSED),  # closing is for a request that ended
    ],
)
def test_the_table_refuses_what_no_call_does(before: RequestStatus, after: RequestStatus):
    assert not may_follow(before, after)


def _call(user: str, *, parent: str | None = None) -> CallRecord:
    return CallRecord(
        request_id=uuid.uuid4().hex, parent_request_id=parent, session_id=None, user_id=user,
        tool="brewer", action="brew", call_name="brewer_brew", parameters={}, background=True,
    )


Step = Callable[[RequestLog, JobRequests, CallRecord], Awaitable[object]]
ENDS: dict[str, Step] = {
    "completed": lambda log, _, call: log.finished(call, ToolResult(message="coffee")),
    "failed": lambda log, _, call: log.interrupted(call),
    "cancelled": lambda log, _, call: log.cancelled(call),
}
LATE: dict[str, Step] = {
    **ENDS,
    "resumed": lambda log, _, call: log.resumed(call),
    "requeued here": lambda log, _, call: log.requeued(call),
    "paused": lambda log, _, call: log.paused(call),
    "queued": lambda _, jobs, call: jobs.queued(call, job_id=7),
    "held": lambda _, jobs, call: jobs.held(call, job_id=7),
    "requeued on the queue": lambda _, jobs, call: jobs.requeued(call, job_id=7, detail="worker gone"),
    "taken": lambda _, jobs, call: jobs.take(call.request_id, user_id=call.user_id or "", job_id=7, worker="w"),
}


@pytest.mark.parametrize(("first", "late"), list(itertools.product(ENDS, LATE)))
async def test_a_call_that_ended_never_moves_again(
    database: Database, caplog: pytest.LogCaptureFixture, first: str, late: str
):
    """Failed then completed, completed then running, ...: the log keeps the first end and says why."""
    user = f"end-{uuid.uuid4().hex[:6]}"
    log, jobs = RequestLog(database), JobRequests(database)
    call = _call(user)
    await log.started(call)
    await ENDS[first](log, jobs, call)
    history = await request_history(database, call.request_id, user_id=user)

    with caplog.at_level(logging.INFO, logger="orchestrator.store.requests"):
        await LATE[late](log, jobs, call)

    [node] = await request_tree(database, call.request_id, user_id=user)
    assert (node.status, node.outcome) == (S.CLOSED, first)
    assert await request_history(database, call.request_id, user_id=user) == history
    if late in ENDS or late in ("resumed", "requeued here", "paused"):  # the request log's own moves
        assert f"request {call.request_id}: " in caplog.text
        assert "refused: it is closed" in caplog.text


async def test_a_call_that_ended_waiting_for_its_children_only_closes(database: Database):
    """Ended, not closed (a child still runs): it may close, it may not run or end again."""
    user = f"wait-{uuid.uuid4().hex[:6]}"
    log = RequestLog(database)
    parent = _call(user)
    child = _call(user, parent=parent.request_id)
    for call in (parent, child):
        await log.started(call)
    await log.finished(parent, ToolResult(message="done"))
    await log.resumed(parent)
    await log.interrupted(parent)
    assert [(n.status, n.outcome) for n in await request_tree(database, parent.request_id, user_id=user)] == [
        (S.COMPLETED, S.COMPLETED),
        (S.RUNNING, None),
    ]

    await log.finished(child, ToolResult(message="child done"))

    assert [(n.status, n.outcome) for n in await request_tree(database, parent.request_id, user_id=user)] == [
        (S.CLOSED, S.COMPLETED),
        (S.CLOSED, S.COMPLETED),
    ]
    statuses = [status for status, _ in await request_history(database, parent.request_id, user_id=user)]
    assert statuses == ["created", "acknowledged", "running", "completed", "notified", "closed"]


async def test_a_paused_call_runs_again_and_ends_once(database: Database):
    """What the table allows still happens: paused, resumed, paused again, then one end."""
    user = f"pause-{uuid.uuid4().hex[:6]}"
    log = RequestLog(database)
    call = _call(user)
    await log.started(call)
    await log.paused(call)
    await log.resumed(call)
    await log.paused(call)
    await log.resumed(call)
    await log.finished(call, ToolResult(message="answered"))

    statuses = [status for status, _ in await request_history(database, call.request_id, user_id=user)]
    assert statuses == [
        "created", "acknowledged", "running", "paused", "resumed", "running", "paused", "resumed",
        "running", "completed", "closed",
    ]


# Request trees: each a parent's children by index (0 is the root), and the order their calls
# end in. "A request closes once it ended and all it caused closed" is one SQL condition
# (`requests.OPEN_CHILDREN`), reached two ways: the call's own end (`END_SQL`), and a child
# closing under a parent that ended before it (`close_if_done`). Both must agree with the rule
# over every order the calls of a tree can end in.
TREES = {
    "a parent and one child": {0: [1]},
    "a parent and two children": {0: [1, 2]},
    "three levels": {0: [1], 1: [2]},
    "two levels under two children": {0: [1, 2], 1: [3], 2: [4]},
}


def _closed_by_the_rule(children: dict[int, list[int]], ended: set[int], size: int) -> set[int]:
    closed: set[int] = set()
    for node in reversed(range(size)):  # children have higher indexes than their parents
        if node in ended and all(child in closed for child in children.get(node, [])):
            closed.add(node)
    return closed


@pytest.mark.parametrize("shape", TREES)
async def test_parents_close_by_one_rule_whichever_call_ends_last(database: Database, shape: str):
    children = TREES[shape]
    size = 1 + max(child for kids in children.values() for child in kids)
    log = RequestLog(database)
    for order in itertools.permutations(range(size)):
        user = f"tree-{uuid.uuid4().hex[:6]}"
        calls: list[CallRecord] = [_call(user)]
        parents = {child: parent for parent, kids in children.items() for child in kids}
        for node in range(1, size):
            calls.append(_call(user, parent=calls[parents[node]].request_id))
        for call in calls:
            await log.started(call)
        ended: set[int] = set()
        for node in order:
            await log.finished(calls[node], ToolResult(message=f"node {node}"))
            ended.add(node)
            tree = {n.request_id: n.status for n in await request_tree(database, calls[0].request_id, user_id=user)}
            closed = {i for i, call in enumerate(calls) if tree[call.request_id] == S.CLOSED}
            assert closed == _closed_by_the_rule(children, ended, size), (shape, order, node)


async def test_a_handover_recorded_after_a_worker_took_the_job_changes_nothing(database: Database):
    """The trials' `queued` after the job had started: the worker's `running` stands."""
    user = f"hand-{uuid.uuid4().hex[:6]}"
    log, jobs = RequestLog(database), JobRequests(database)
    call = _call(user)
    await log.started(call)
    assert await jobs.take(call.request_id, user_id=user, job_id=7, worker="w") is not None

    assert not await jobs.queued(call, job_id=7)

    [node] = await request_tree(database, call.request_id, user_id=user)
    assert node.status == S.RUNNING
    statuses = [status for status, _ in await request_history(database, call.request_id, user_id=user)]
    assert statuses == ["created", "acknowledged", "running", "running"]
