"""What the tests of actions share: the example workflow's folder, approved in a home of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.actions.address import Address, find_action, find_folder
from orchestrator.actions.host import close_hosts
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.testing import ScriptedChatModel

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "stamp_workflow"


def approve_all(folder: object, status: object) -> bool:
    return True


def loaded_action(settings: Settings, folder: str, action: str) -> Address:
    """`folder`'s `action`, its folders approved and loaded as the orchestrator loads them."""
    runtime = Orchestrator.create(
        settings, model=ScriptedChatModel(), checkpointer=InMemorySaver(), ask=approve_all
    )
    return find_action(find_folder(runtime.sub_agents, folder, settings=settings), action)


@pytest.fixture
def stamp(tmp_path: Path) -> Address:
    """The example's `stamp_agent.stamp` (its `mark` fixed by the folder's configuration), in
    its held process (the example is no shipped folder): its tests are marked `process`."""
    settings = load_settings(sub_graphs_dir=EXAMPLE / "sub_graphs", data_dir=tmp_path / "data")
    return loaded_action(settings, "stamp_agent", "stamp")


@pytest.fixture
def closing_hosts() -> Iterator[None]:
    """The action hosts a test started (`as_node`) are closed after it, as at exit."""
    yield
    close_hosts()
