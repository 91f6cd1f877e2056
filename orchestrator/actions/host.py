"""The orchestrator a process's workflow nodes run their actions with: started on first use.

One per process and settings (tool folders, data, database), on the process's
action portal (see `portal`); stopped when the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.actions.action_runner import ActionRunner
from orchestrator.actions.address import Address, find_action, find_folder, imported_now
from orchestrator.actions.portal import Portal
from orchestrator.folders.approvals import Reviewed, review_folders
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings
from orchestrator.store.storage import Storage

CLOSE_SECONDS = 30.0


def nobody_answers(*_: object) -> None:
    """No one is asked about a folder here: what awaits a decision stays unapproved."""
    return None


@dataclass
class _Started:
    runtime: Orchestrator
    storage: Storage


class ActionHost:
    """Starts the orchestrator (approved folders, storage) on the portal once, then runs actions on it."""

    def __init__(self, settings: Settings) -> None:
        # The message archive is not used here: no embedding model is loaded for it.
        self.settings = settings.model_copy(update={"embeddings": "none"})
        self.portal = Portal()
        self._started: asyncio.Task[_Started] | None = None

    def reviewed(self) -> Reviewed:
        """The folder tree and its approvals, asking no one."""
        return review_folders(self.settings, nobody_answers)

    async def address(self, folder: str, action: str) -> Address:
        """`folder`'s `action` in the started orchestrator (on the portal)."""
        started = await self._start()
        loaded = find_folder(started.runtime.sub_agents, folder, settings=self.settings)
        return find_action(await imported_now(loaded), action)

    async def runner(self, user: str) -> ActionRunner:
        """A runner of actions for `user` (on the portal)."""
        return ActionRunner((await self._start()).runtime, user)

    async def _start(self) -> _Started:
        if self._started is None:
            self._started = asyncio.ensure_future(self._open())
        return await asyncio.shield(self._started)

    async def _open(self) -> _Started:
        storage = await Storage.open(self.settings)
        try:
            reviewed = await asyncio.to_thread(self.reviewed)
            runtime = await Orchestrator.start(self.settings, reviewed=reviewed, storage=storage)
        except BaseException:
            await storage.close()
            raise
        return _Started(runtime, storage)

    def close(self) -> None:
        """Close the orchestrator and its storage, then stop the portal."""
        if self._started is not None:
            self.portal.submit(self._close()).result(CLOSE_SECONDS)
        self.portal.stop()

    async def _close(self) -> None:
        assert self._started is not None
        try:
            started = await self._started
        except Exception:  # it never started: nothing to close
            return
        await started.runtime.close()
        await started.storage.close()


_hosts: dict[tuple[str, str, str | None], ActionHost] = {}
_lock = threading.Lock()


def host_for(settings: Settings) -> ActionHost:
    """The process's host for these settings' folders, data and database."""
    key = (str(settings.sub_graphs_dir), str(settings.data_dir), settings.database_url)
    with _lock:
        if key not in _hosts:
            if not _hosts:
                _at_exit(close_hosts)
            _hosts[key] = ActionHost(settings)
        return _hosts[key]


def _at_exit(close: Callable[[], None]) -> None:
    """Run `close` on the way out, before the threads' executors are shut down.

    Closing the orchestrator hands work to executors (MCP clients, databases);
    plain `atexit` runs after `concurrent.futures` has shut them down. The
    hook `concurrent.futures` itself uses runs first, when there is one.
    """
    register = getattr(threading, "_register_atexit", None)
    if register is None:
        atexit.register(close)
    else:
        register(close)


def close_hosts() -> None:
    """Close every host of the process (at exit)."""
    with _lock:
        hosts = list(_hosts.values())
        _hosts.clear()
    for host in hosts:
        host.close()
