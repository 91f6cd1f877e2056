"""Folders as the Basic Orchestrator seed lays them out (issue 33, item 7): src/config/tool_config.yaml,
requirements.txt shown at approval and installed after a yes, a missing package named, the folder's .env."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import MissingPackageError
from orchestrator.folders.discovery import content_hash, discover
from orchestrator.terminal.folder_reach import describe_folder
from orchestrator.testing import load_tool_folder
from tests.helpers import run_cli
from tests.tool_folders import ECHO_TOOL, write_folder

MISSING = "surely-not-installed-pkg"
FAKE_PIP = """#!{python}
import sys
from pathlib import Path

Path({log!r}).write_text(" ".join(sys.argv[1:]))
info = Path({site!r}) / "surely_not_installed_pkg-1.0.dist-info"
info.mkdir(parents=True)
(info / "METADATA").write_text("Metadata-Version: 2.1\\nName: surely-not-installed-pkg\\nVersion: 1.0\\n")
"""


def seed_folder(root: Path, name: str = "seeded", *, code: str = ECHO_TOOL) -> Path:
    """A folder with its config in src/config/, as the seed has it, and a requirements.txt."""
    folder = root / name
    (folder / "src" / "config").mkdir(parents=True)
    config = {"name": name, "description": "A seed-style tool.", "version": "1.0"}
    (folder / "src" / "config" / "tool_config.yaml").write_text(yaml.safe_dump(config))
    (folder / f"{name}_tool.py").write_text(code)
    (folder / "requirements.txt").write_text(f"# what it needs\npydantic>=2\n{MISSING}==1.0\n")
    return folder


def test_a_config_in_src_config_is_found_and_loaded(tmp_path: Path):
    folder = seed_folder(tmp_path / "sub_graphs")

    [node] = discover(tmp_path / "sub_graphs").nodes
    tool = load_tool_folder(folder)

    assert node.folder.name == "seeded" and node.folder.path == folder
    assert tool.name == "seeded" and "say" in tool.actions


def test_a_folder_with_both_places_is_skipped_saying_so(tmp_path: Path):
    folder = seed_folder(tmp_path / "sub_graphs")
    (folder / "tool_config.yaml").write_text((folder / "src/config/tool_config.yaml").read_text())

    found = discover(tmp_path / "sub_graphs")

    assert found.nodes == []
    [problem] = found.problems
    assert problem.reason == "both src/config/tool_config.yaml and tool_config.yaml are there: keep one"


def test_the_approval_shows_the_requirements_and_what_is_missing(tmp_path: Path):
    seed_folder(tmp_path / "sub_graphs")
    [node] = discover(tmp_path / "sub_graphs").nodes

    shown = describe_folder(node.folder)
    approved = run_cli("tools", "approve", "seeded", cwd=tmp_path)

    pydantic = sys.modules["pydantic"].VERSION
    assert f"requires (requirements.txt): pydantic>=2 (installed {pydantic}), {MISSING}==1.0 (missing)" in shown
    assert (
        f"missing from this environment: {MISSING}; once approved, "
        "`orchestrator tools install seeded` installs them"
    ) in shown
    assert approved.returncode == 0 and f"{MISSING}==1.0 (missing)" in approved.stdout


def test_an_import_of_a_missing_package_says_which_and_how_to_install_it(tmp_path: Path):
    code = "import surely_not_installed_pkg\n" + ECHO_TOOL
    listed = seed_folder(tmp_path / "sub_graphs", code=code)
    unlisted = write_folder(tmp_path / "sub_graphs", "other", code="import another_missing_module\n")

    with pytest.raises(MissingPackageError) as from_requirements:
        load_tool_folder(listed)
    with pytest.raises(MissingPackageError) as not_listed:
        load_tool_folder(unlisted)

    assert str(from_requirements.value) == (
        f"it imports surely_not_installed_pkg, from the package {MISSING}==1.0 of its "
        "requirements.txt, which is not installed here: `orchestrator tools install seeded` installs it"
    )
    assert str(not_listed.value).startswith(
        "it imports another_missing_module, which is not installed here and not in its "
        f"requirements.txt: install it ({sys.executable} -m pip install another_missing_module)"
    )


def test_install_asks_first_and_a_no_installs_nothing(tmp_path: Path):
    seed_folder(tmp_path / "sub_graphs")

    refused = run_cli("tools", "install", "seeded", cwd=tmp_path, stdin="n\n")
    ended = run_cli("tools", "install", "seeded", cwd=tmp_path)  # end of input: no

    assert refused.returncode == 1 and "nothing installed" in refused.stdout
    assert f"{MISSING}==1.0 (missing)" in refused.stderr and "Install them? [y/N]" in refused.stderr
    assert ended.returncode == 1 and "nothing installed" in ended.stdout


@pytest.mark.process
def test_install_after_a_yes_runs_this_pythons_pip_with_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    seed_folder(tmp_path / "sub_graphs")
    site, log = tmp_path / "site", tmp_path / "pip-args"
    fake = tmp_path / "python"
    fake.write_text(FAKE_PIP.format(python=sys.executable, log=str(log), site=str(site)))
    fake.chmod(0o755)
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "executable", str(fake))

    done = run_cli("tools", "install", "seeded", cwd=tmp_path, stdin="y\n")
    again = run_cli("tools", "install", "seeded", cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert log.read_text() == f"-m pip install {MISSING}==1.0", "only what is missing"
    assert done.stdout.strip() == f"installed for seeded: {MISSING}==1.0"
    assert again.returncode == 0 and "everything seeded's requirements.txt names is installed" in again.stdout


def test_a_denied_folder_is_not_installed(tmp_path: Path):
    seed_folder(tmp_path / "sub_graphs")
    assert run_cli("tools", "revoke", "seeded", cwd=tmp_path).returncode == 0

    refused = run_cli("tools", "install", "seeded", "--yes", cwd=tmp_path)

    assert refused.returncode == 1 and "seeded is denied" in refused.stderr


def test_the_folders_env_is_its_settings_not_part_of_its_approval(tmp_path: Path):
    folder = seed_folder(tmp_path / "sub_graphs")
    before = content_hash(folder)

    (folder / ".env").write_text("SECRET_TOKEN=changed\n")

    assert content_hash(folder) == before
