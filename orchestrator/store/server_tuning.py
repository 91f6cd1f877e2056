"""The embedded server's memory, sized to the machine instead of PostgreSQL's small defaults.

PostgreSQL starts with 128 MB of shared buffers. Past a few hundred thousand
messages the search indexes are gigabytes: each search and each vector stored
then copies its pages in from the OS cache (inserting one vector into a
million-vector HNSW graph read about a thousand pages: 8 ms instead of 0.5).
A quarter of the machine's memory (PostgreSQL's own advice for a server), at
most 8 GB, is only taken as pages are used. Index builds (migrations, `db
reembed`) get room to build an HNSW graph in memory.

The settings live in a file of their own in the data directory, included from
postgresql.conf; they take effect when the server next starts.
"""

from __future__ import annotations

from pathlib import Path

import psutil

CONF = "orchestrator.conf"
INCLUDE = f"include_if_exists = '{CONF}'"
MB = 1024 * 1024


def memory_settings(total_bytes: int) -> dict[str, str]:
    """The settings for a machine of `total_bytes` of memory."""
    shared = min(max(total_bytes // 4, 128 * MB), 8 * 1024 * MB)
    maintenance = min(max(total_bytes // 16, 64 * MB), 2 * 1024 * MB)
    return {"shared_buffers": f"{shared // MB}MB", "maintenance_work_mem": f"{maintenance // MB}MB"}


def tune_cluster(pgdata: Path, *, total_bytes: int | None = None) -> bool:
    """Write the memory settings for this machine; whether anything changed (the caller holds the lock)."""
    settings = memory_settings(total_bytes or psutil.virtual_memory().total)
    text = "# written by the orchestrator for this machine's memory; edits are overwritten\n" + "".join(
        f"{name} = '{value}'\n" for name, value in settings.items()
    )
    conf, main = pgdata / CONF, pgdata / "postgresql.conf"
    changed = not conf.exists() or conf.read_text() != text
    if changed:
        conf.write_text(text)
    if INCLUDE not in main.read_text():
        with main.open("a") as file:
            file.write(f"\n{INCLUDE}\n")
        changed = True
    return changed
