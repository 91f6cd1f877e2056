"""The suite's shape: `db` marked from fixtures, processes of unmarked tests caught, a layout by subject."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ProcessWatch, pytest_collection_modifyitems

TESTS = Path(__file__).resolve().parent


@dataclass
class Collected:
    """What the marking hook reads of a collected test, and the marks it adds."""

    fixturenames: list[str]
    marks: list[str] = field(default_factory=list)

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.name)


@pytest.mark.parametrize("fixture", ["database", "database_url", "cli", "postgres_url", "embedded_dir"])
def test_a_test_reaching_the_embedded_postgresql_through_a_fixture_is_marked_db(fixture: str):
    on_database = Collected(fixturenames=["tmp_path", fixture])
    alone = Collected(fixturenames=["tmp_path", "scripted", "monkeypatch"])

    pytest_collection_modifyitems([on_database, alone])  # type: ignore[list-item]

    assert on_database.marks == ["db"]
    assert alone.marks == []


@pytest.mark.process
def test_the_watch_names_a_process_started_while_it_watches_and_only_then():
    watch = ProcessWatch()
    sys.addaudithook(watch)

    subprocess.run([sys.executable, "-c", "pass"], check=True)  # before: not watching
    watch.start()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    seen = watch.stop()
    subprocess.run([sys.executable, "-c", "pass"], check=True)  # after: not watching

    assert seen == [sys.executable]
    assert watch.started == [sys.executable]


def test_every_test_module_sits_in_a_subject_folder_or_covers_the_whole_package():
    package_wide = {"test_errors.py", "test_layers.py", "test_testing_support.py", "test_docs.py",
                    "test_runtime_edges.py", "test_suite_shape.py", "test_typing.py"}
    at_the_top = {p.name for p in TESTS.glob("test_*.py")}
    by_date = [p.name for p in TESTS.rglob("test_*.py") if p.name.startswith(("test_trials", "test_hardening"))]

    assert at_the_top == package_wide
    assert by_date == [], "named for what they cover, not for when they were written"
    for folder in {p.parent for p in TESTS.rglob("test_*.py")} - {TESTS}:
        assert (folder / "__init__.py").is_file(), f"{folder.name}: `from tests...` imports need it"
