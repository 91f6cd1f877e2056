"""The channel values this process last wrote to each thread's checkpoint, by version.

Reading a thread's checkpoint back deserializes every blob, the whole message
history first of all; a session's next turn reads what its last one wrote. A
blob's version is unique to what was written under it (LangGraph's Postgres
versions carry a random part), so a value kept under the same thread, namespace,
channel and version is the blob's value, and another process's write simply
misses.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

LIMIT = 256  # (thread, namespace, channel) entries kept: the most recently written


class WrittenValues:
    """The last value written per (thread, namespace, channel), with its version."""

    def __init__(self, *, limit: int = LIMIT) -> None:
        self.limit = limit
        self._values: dict[tuple[str, str, str], tuple[str, object]] = {}

    def wrote(
        self,
        thread_id: str,
        namespace: str,
        values: Mapping[str, object],
        versions: Mapping[str, object],
    ) -> None:
        """Keep `values` as written under `versions` (channels without a version are not)."""
        for channel, value in values.items():
            key = (thread_id, namespace, channel)
            self._values.pop(key, None)  # to the end: the newest
            self._values[key] = (str(versions[channel]), value)
        while len(self._values) > self.limit:
            del self._values[next(iter(self._values))]

    def read(
        self, thread_id: str, namespace: str, channel: str, version: object
    ) -> tuple[bool, object]:
        """(True, a shallow copy of the value) when this is the version written; else (False, None).

        A copy: a channel may take a list or dict it was restored from as its own.
        """
        found = self._values.get((thread_id, namespace, channel))
        if found is None or found[0] != str(version):
            return False, None
        return True, copy.copy(found[1])
