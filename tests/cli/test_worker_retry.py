"""The worker's waits between attempts to reach its database, and the reason its line gives."""

from __future__ import annotations

from itertools import islice

import psycopg

from orchestrator.cli.worker import retry_reason, retry_waits
from orchestrator.store.engine import database_problem

REFUSED = (
    'connection failed: connection to server at "10.0.0.5", port 5432 failed: Connection refused\n'
    "\tIs the server running on that host and accepting TCP/IP connections?"
)


def test_the_wait_starts_at_a_second_and_doubles_up_to_thirty() -> None:
    assert list(islice(retry_waits(), 8)) == [1, 2, 4, 8, 16, 30, 30, 30]


def test_the_line_gives_what_the_driver_said_last() -> None:
    problem = database_problem(psycopg.OperationalError(REFUSED))
    assert problem is not None
    assert retry_reason(problem) == "connection refused"
