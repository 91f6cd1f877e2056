"""The warm server keeper's embedding (`store.keeper_embedding`): one database kept between looks."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from orchestrator.settings import Settings, load_settings
from orchestrator.store import Database, MessageStore, keeper_embedding
from orchestrator.store.embeddings import Embedder
from orchestrator.store.logins import Logins
from orchestrator.store.sessions import claim_session
from orchestrator.testing import KeywordEmbeddings

KEYWORDS = Embedder(KeywordEmbeddings(), "keywords", symmetric=True)


async def store_one(logins: Logins, user: str, content: str) -> None:
    """A message stored as a command stores it: waiting for its vector."""
    database = Database(logins.owner_url, app_url=logins.app_url)
    try:
        session = f"s-{uuid.uuid4().hex[:8]}"
        await claim_session(database, session, user_id=user)
        message = HumanMessage(content=content, id=uuid.uuid4().hex)
        await MessageStore(database).save([message], session_id=session, user_id=user)
    finally:
        await database.close()


async def found(logins: Logins, user: str, query: str) -> list[str]:
    database = Database(logins.owner_url, app_url=logins.app_url)
    try:
        store = MessageStore(database, embedder=KEYWORDS)
        return [m.content for m in await store.semantic_message_search(query, user, 1, 0.5)]
    finally:
        await database.close()


def test_two_looks_embed_through_one_database_opened_at_the_first(
    database_logins: Logins, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    opened: list[Database] = []

    class Counted(Database):
        @classmethod
        def from_settings(cls, settings: Settings) -> Database:
            database = super().from_settings(settings)
            opened.append(database)
            return database

    monkeypatch.setattr(keeper_embedding, "Database", Counted)
    monkeypatch.setattr(keeper_embedding, "build_embedder", lambda _: KEYWORDS)
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=database_logins.owner_url,
        database_app_url=database_logins.app_url,
    )
    user = f"kim-{uuid.uuid4().hex[:8]}"
    embed = keeper_embedding.WaitingEmbedder(settings)
    try:
        asyncio.run(store_one(database_logins, user, "the red kite"))
        embed()  # a look after one command
        asyncio.run(store_one(database_logins, user, "the blue heron"))
        embed()  # and after the next
    finally:
        embed.close()

    assert len(opened) == 1, "the second look used the database the first opened"
    assert asyncio.run(found(database_logins, user, "red kite")) == ["the red kite"]
    assert asyncio.run(found(database_logins, user, "blue heron")) == ["the blue heron"]
