"""Issue 36, a second start does less work: approved code compiled once, kept signed, keyed by its bytes.

Every start still hashes every byte (a change, its times restored or not, is
asked about again); what a second start is spared is compiling the same bytes.
"""

from __future__ import annotations

import marshal
import os
import stat
from pathlib import Path

import pytest

from orchestrator.folders import importer
from orchestrator.folders.approvals import Status
from orchestrator.folders.code_cache import CACHE_DIR, MAC_BYTES, CodeCache
from orchestrator.paths import user_data_dir
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from tests.tool_folders import approve_all, start_approved, write_folder

MARKED_TOOL = '''
from pydantic import BaseModel

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

MARK = "a"


class Nothing(BaseModel):
    pass


class Marked(Tool):
    @action(Nothing)
    async def mark(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Say which code runs."""
        return request.result(MARK)
'''


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> CodeCache:
    """The importer's cache, counting from zero for this test."""
    fresh = CodeCache()
    monkeypatch.setattr(importer, "CODE_CACHE", fresh)
    return fresh


async def mark(runtime: Orchestrator) -> str:
    [tool] = [t for t in runtime.tools if t.name == "marked_mark"]
    return (await tool.ainvoke({})).message


async def test_a_second_start_takes_the_approved_code_compiled_at_the_first(
    settings: Settings, cache: CodeCache
):
    write_folder(settings.sub_graphs_dir, "marked", code=MARKED_TOOL)
    approve_all(settings)

    first = start_approved(settings)
    compiled_first = (cache.hits, cache.misses)
    second = start_approved(settings)  # offers the folder from its manifest: imported at its first call
    marks = [await mark(first), await mark(second)]

    assert compiled_first == (0, 1)
    assert (cache.hits, cache.misses) == (1, 1)  # nothing compiled again
    assert marks == ["a", "a"]


async def test_a_byte_changed_with_its_times_restored_is_asked_about_and_the_new_code_runs(
    settings: Settings, cache: CodeCache
):
    folder = write_folder(settings.sub_graphs_dir, "marked", code=MARKED_TOOL)
    approve_all(settings)
    start_approved(settings)  # the approved code is in the cache now
    code = folder / "marked_tool.py"
    before = os.stat(code)

    code.write_text(MARKED_TOOL.replace('MARK = "a"', 'MARK = "b"'))  # same size, one byte
    os.utime(code, ns=(before.st_atime_ns, before.st_mtime_ns))  # as if never touched
    answers: list[Status] = []
    runtime = start_approved(settings, answers)

    assert os.stat(code).st_mtime_ns == before.st_mtime_ns
    assert os.stat(code).st_size == before.st_size
    assert answers == [Status.CHANGED]
    assert await mark(runtime) == "b"  # compiled from the new bytes, not served the old code
    assert cache.misses == 2


async def test_an_entry_this_installation_did_not_sign_is_never_run(
    settings: Settings, cache: CodeCache
):
    write_folder(settings.sub_graphs_dir, "marked", code=MARKED_TOOL)
    approve_all(settings)
    start_approved(settings)
    [entry] = (user_data_dir() / CACHE_DIR).iterdir()
    mac = entry.read_bytes()[:MAC_BYTES]
    forged = compile(MARKED_TOOL.replace('MARK = "a"', 'MARK = "forged"'), "x.py", "exec")
    entry.write_bytes(mac + marshal.dumps(forged))  # another code under the old signature

    runtime = start_approved(settings)

    assert await mark(runtime) == "a"
    assert (cache.hits, cache.misses) == (0, 2)


def test_the_cache_is_private_to_the_user(settings: Settings, cache: CodeCache):
    write_folder(settings.sub_graphs_dir, "marked", code=MARKED_TOOL)
    approve_all(settings)
    start_approved(settings)
    directory = user_data_dir() / CACHE_DIR
    [entry] = directory.iterdir()

    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
