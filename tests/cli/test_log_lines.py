"""What a command logs reaches the terminal as one line a record, as when the database is away."""

from __future__ import annotations

import logging

import psycopg
import pytest
from procrastinate.exceptions import ConnectorException

from orchestrator.cli.common import log_handler

REFUSED = (
    'connection failed: connection to server at "127.0.0.1", port 5432 failed: Connection refused\n'
    "\tIs the server running on that host and accepting TCP/IP connections?"
)


def _log_an_outage(level: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What procrastinate logs when its heartbeat finds the database gone, through our handler."""
    logger = logging.getLogger("procrastinate.utils.test")
    logger.propagate = False
    handler = log_handler(level)
    logger.addHandler(handler)
    try:
        try:
            try:
                raise psycopg.OperationalError(REFUSED)
            except psycopg.OperationalError as error:
                raise ConnectorException() from error
        except ConnectorException as error:
            logger.error("update_heartbeats error: %r", error, exc_info=True)
        logger.warning("delivering job results failed: %s", psycopg.OperationalError(REFUSED))
    finally:
        logger.removeHandler(handler)
    return capsys.readouterr().err


def test_below_debug_each_record_is_one_line_without_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = _log_an_outage("WARNING", capsys)
    assert said.splitlines() == [
        "ERROR procrastinate.utils.test: update_heartbeats error: "
        "ConnectorException('\\n    Database error.\\n    ')",
        'WARNING procrastinate.utils.test: delivering job results failed: connection failed: '
        'connection to server at "127.0.0.1", port 5432 failed: Connection refused '
        "Is the server running on that host and accepting TCP/IP connections?",
    ]


def test_at_debug_the_traceback_is_shown_whole(capsys: pytest.CaptureFixture[str]) -> None:
    said = _log_an_outage("DEBUG", capsys)
    assert "Traceback (most recent call last)" in said
    assert "psycopg.OperationalError: connection failed" in said
