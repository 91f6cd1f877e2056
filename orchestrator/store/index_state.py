"""The state of semantic search's indexes, for `orchestrator db status`."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from orchestrator.store.engine import Database

# The indexes semantic search reads, and what each serves (migrations 001 and 010).
SEARCH_INDEXES = {
    "messages_vectors": "each user's vectors, for exact search",
    "messages_embedding": "HNSW, for users past the exact-search limit",
}
STATE = text(
    "SELECT c.relname, i.indisvalid, pg_size_pretty(pg_relation_size(c.oid)) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE i.indrelid = 'messages'::regclass AND c.relname = ANY(:names)"
)
# A build in progress (CREATE INDEX, REINDEX) reports its phase and how far it is.
PROGRESS = text(
    "SELECT c.relname, p.phase, p.blocks_done, p.blocks_total, p.tuples_done, p.tuples_total "
    "FROM pg_stat_progress_create_index p JOIN pg_class c ON c.oid = p.index_relid "
    "WHERE p.relid = 'messages'::regclass"
)
# The visibility map's share as the last VACUUM or ANALYZE counted it: where a page is
# all-visible, exact search reads the index alone.
VISIBLE = text("SELECT relpages, relallvisible FROM pg_class WHERE oid = 'messages'::regclass")


@dataclass(frozen=True)
class IndexState:
    """One search index: whether it exists and is usable, its size, a build under way."""

    name: str
    serves: str
    present: bool
    valid: bool = False
    size: str = ""
    building: str | None = None

    def describe(self) -> str:
        """One line for a person."""
        if self.building is not None:
            state = f"being built ({self.building})"
        elif not self.present:
            state = "missing (`orchestrator db upgrade` makes it)"
        elif not self.valid:
            state = f"not valid: a build was interrupted (REINDEX INDEX {self.name} makes it again)"
        else:
            state = f"ready, {self.size}"
        return f"{self.name} ({self.serves}): {state}"


@dataclass(frozen=True)
class SearchIndexes:
    """Semantic search's indexes, and the share of the table exact search reads from its index alone."""

    indexes: list[IndexState]
    all_visible: float | None


async def search_indexes(database: Database) -> SearchIndexes:
    """The state of semantic search's indexes now (a maintenance view, as the owner)."""
    async with database.admin_transaction() as connection:
        found = {
            name: (valid, size)
            for name, valid, size in await connection.execute(STATE, {"names": list(SEARCH_INDEXES)})
        }
        building = {row[0]: _progress(*row[1:]) for row in await connection.execute(PROGRESS)}
        pages, visible = (await connection.execute(VISIBLE)).one()
    indexes: list[IndexState] = []
    for name, serves in SEARCH_INDEXES.items():
        valid, size = found.get(name, (False, ""))
        indexes.append(
            IndexState(name, serves, present=name in found, valid=valid, size=size, building=building.get(name))
        )
    return SearchIndexes(indexes, visible / pages if pages > 0 else None)


def _progress(phase: str, blocks_done: int, blocks_total: int, tuples_done: int, tuples_total: int) -> str:
    for done, total in ((blocks_done, blocks_total), (tuples_done, tuples_total)):
        if total:
            return f"{phase}, {100 * done // total}%"
    return phase
