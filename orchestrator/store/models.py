"""The core tables' columns, as the code queries them: declared here only.

Their DDL is the history in `schema/*.sql` (see `migrations`); a test checks
these columns against a migrated database. A tool folder's tables (`tasks`
is the task_agent's) are its own, made by its `migrations/`.
"""

from __future__ import annotations

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    LargeBinary,
    MetaData,
    Table,
    Text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR

metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("metadata", JSONB, nullable=False),  # a thread's, as `orchestrator serve` keeps it
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

# `orchestrator serve`'s runs (see store/runs.py)
runs = Table(
    "runs",
    metadata,
    Column("run_id", Text, primary_key=True),
    Column("thread_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("assistant_id", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("metadata", JSONB, nullable=False),
    Column("error", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("multitask_strategy", Text, nullable=False),
)

messages = Table(
    "messages",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("message_id", Text, nullable=False, unique=True),
    Column("session_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("tool_name", Text),
    Column("request_id", Text),
    Column("created_at", DateTime(timezone=True)),
    Column("search", TSVECTOR),
    Column("embedding", Vector()),
    Column("embedding_model", Text),
)

requests = Table(
    "requests",
    metadata,
    Column("request_id", Text, primary_key=True),
    Column("parent_request_id", Text),
    Column("session_id", Text),
    Column("user_id", Text, nullable=False),
    Column("tool", Text, nullable=False),
    Column("action", Text),
    Column("parameters", JSONB),
    Column("status", Text, nullable=False),
    Column("result", JSONB),
    Column("error", JSONB),
    Column("created_at", DateTime(timezone=True)),
    Column("updated_at", DateTime(timezone=True)),
    Column("outcome", Text),
    Column("call_name", Text),
    Column("background", Boolean),
    Column("idempotent", Boolean),
    Column("owner", Text),
    Column("closed_at", DateTime(timezone=True)),
    Column("job_id", BigInteger),
    Column("delivered_at", DateTime(timezone=True)),
)

request_events = Table(
    "request_events",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("request_id", Text, nullable=False),
    Column("user_id", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("detail", Text),
    Column("at", DateTime(timezone=True)),
)

request_usage = Table(
    "request_usage",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("request_id", Text, nullable=False),
    Column("parent_request_id", Text),
    Column("session_id", Text),
    Column("user_id", Text, nullable=False),
    Column("turn_id", Text),
    Column("kind", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("input_tokens", BigInteger),
    Column("output_tokens", BigInteger),
    Column("cached_input_tokens", BigInteger),
    Column("cache_write_tokens", BigInteger),
    Column("reasoning_tokens", BigInteger),
    Column("cost_usd", Float),
    Column("credits", Float),
    Column("seconds", Float),
    Column("created_at", DateTime(timezone=True)),
)

result_cache = Table(
    "result_cache",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("folder", Text, primary_key=True),
    Column("content", Text, nullable=False),
    Column("call_name", Text, primary_key=True),
    Column("arguments", Text, primary_key=True),
    Column("result", JSONB, nullable=False),
    Column("request_id", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


large_results = Table(
    "large_results",
    metadata,
    Column("handle", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("request_id", Text),
    Column("content", Text, nullable=False),
    Column("total_chars", BigInteger, nullable=False),
    Column("kept_chars", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True)),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


# The server's users and their API keys: the machine owner's, never orchestrator_app's (migration 15).
api_users = Table(
    "api_users",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_id", Text, primary_key=True),
    Column("user_id", Text, nullable=False),
    Column("key_hash", LargeBinary, nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True)),
    Column("last_used_at", DateTime(timezone=True)),
)


agent_conversations = Table(
    "agent_conversations",
    metadata,
    Column("user_id", Text, primary_key=True),
    Column("agent_path", Text, primary_key=True),
    Column("messages", JSONB, nullable=False),
    Column("summary", JSONB),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)
