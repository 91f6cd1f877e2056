"""The local sentence-transformers model exported to ONNX and run by ONNX Runtime.

For a sentence or two, most of BERT's time in PyTorch goes to stepping through
its modules, not to arithmetic; ONNX Runtime runs the same graph in about half
the time (3.6 against 7.0 ms for one sentence on one core here) to the same
vectors (within 2e-7). The export is made from the loaded model once, checked
against its `encode`, and kept in a directory with its tokenizer and the
vectors of a few probes; a later load reads it without torch (a fraction of a
second instead of several) and checks the probes again. A model this does not
know, or an export that does not give `encode`'s vectors, is left to `encode`.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy
    import onnxruntime
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

Encode = Callable[[list[str]], list[list[float]]]
PROBES = [
    "a",
    "a sentence of a few more words, and punctuation!",
    "ünïcödé テキスト",
    "long " * 400,  # past the model's 256 tokens: the truncation is the model's own
]
TOLERANCE = 1e-5
SMALL_BATCH = 64  # fewer texts run on one core: as fast, and the other cores stay the turns'
FILES = ("model.onnx", "tokenizer.json", "probes.json")


class OnnxEncoder:
    """`encode(texts, normalize_embeddings=True)` of a mean-pooling transformer, on ONNX Runtime."""

    def __init__(self, model: str | bytes, tokenizer: Tokenizer, *, batch_size: int) -> None:
        self._model = model  # a path, or the export itself when none is kept
        self._tokenizer = tokenizer
        self._batch_size = batch_size
        self._one_core = _session(model, threads=1)
        self._all_cores: onnxruntime.InferenceSession | None = None

    def __call__(self, texts: list[str]) -> list[list[float]]:
        session = self._one_core if len(texts) < SMALL_BATCH else self._cores()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors += self._batch(session, texts[start : start + self._batch_size])
        return vectors

    def _batch(self, session: onnxruntime.InferenceSession, texts: list[str]) -> list[list[float]]:
        import numpy as np

        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
        return _normalized(_mean(hidden, mask)).tolist()

    def _cores(self) -> onnxruntime.InferenceSession:
        cores = os.cpu_count() or 1
        if cores == 1:
            return self._one_core
        if self._all_cores is None:  # a full batch: catching up, or re-embedding
            self._all_cores = _session(self._model, threads=cores)
        return self._all_cores


def kept(directory: Path, *, batch_size: int) -> OnnxEncoder | None:
    """The export kept in `directory`, if it is whole and still gives its probes' vectors."""
    if not all((directory / name).is_file() for name in FILES):
        return None
    try:
        from tokenizers import Tokenizer

        encoder = OnnxEncoder(
            str(directory / "model.onnx"),
            Tokenizer.from_file(str(directory / "tokenizer.json")),
            batch_size=batch_size,
        )
        expected = json.loads((directory / "probes.json").read_text())
        same = _close(encoder(PROBES), expected)
    except Exception as error:  # unreadable, or no ONNX Runtime: the model is loaded instead
        logger.debug("the kept ONNX export is not used: %s: %s", type(error).__name__, error)
        return None
    return encoder if same else None


def exported(model: object, *, batch_size: int, keep_in: Path | None = None) -> OnnxEncoder | None:
    """`model` (a SentenceTransformer) exported to ONNX, or None where it cannot stand in.

    When the export gives the vectors `model.encode` gives, it is kept in
    `keep_in` (if given) for `kept` to read next time.
    """
    try:
        onnx, tokenizer = _export(model)
        encoder = OnnxEncoder(onnx, tokenizer, batch_size=batch_size)
        expected = model.encode(PROBES, normalize_embeddings=True, convert_to_numpy=True).tolist()  # type: ignore[attr-defined]
        same = _close(encoder(PROBES), expected) and _close(encoder(PROBES[1:2]), expected[1:2])
    except Exception as error:  # an architecture, or a torch, this does not know
        logger.debug("the embedding model is not exported: %s: %s", type(error).__name__, error)
        return None
    if not same:
        return None
    if keep_in is not None:
        _keep(keep_in, onnx=onnx, tokenizer=tokenizer, probes=expected)
    return encoder


def _export(model: object) -> tuple[bytes, Tokenizer]:
    import torch
    from tokenizers import Tokenizer

    transformer, pooling, normalize = model  # type: ignore[misc]  # a SentenceTransformer
    if pooling.pooling_mode != "mean" or type(normalize).__name__ != "Normalize":
        raise TypeError(f"pooling {pooling.pooling_mode!r}, then {type(normalize).__name__}")
    slow = transformer.tokenizer
    # The fast tokenizer underneath pads and truncates as the model's files say (128,
    # fixed); `encode` asks for the longest text of each batch, cut at the model's limit.
    tokenizer = Tokenizer.from_str(slow.backend_tokenizer.to_str())
    tokenizer.enable_truncation(max_length=transformer.max_seq_length)
    tokenizer.enable_padding(pad_id=slow.pad_token_id, pad_token=slow.pad_token, direction=slow.padding_side)
    probe = slow(PROBES, padding=True, truncation=True, max_length=transformer.max_seq_length, return_tensors="pt")
    axes = {0: "texts", 1: "tokens"}
    onnx = io.BytesIO()
    # The TorchScript-based exporter (the newer one needs onnxscript) warns of its own
    # deprecation and of branches taken on the probe's values: the check is what vouches.
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _hidden_states(transformer.auto_model),
            (probe["input_ids"], probe["attention_mask"]),
            onnx,
            input_names=["input_ids", "attention_mask"],
            output_names=["hidden"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "hidden": axes},
            opset_version=17,
            dynamo=False,
        )
    return onnx.getvalue(), tokenizer


def _hidden_states(auto_model: object) -> object:
    """A module giving the transformer's last hidden states for (input ids, attention mask)."""
    import torch

    class HiddenStates(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.auto_model = auto_model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            outputs = self.auto_model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)
            return outputs[0]

    return HiddenStates().eval()


def _keep(directory: Path, *, onnx: bytes, tokenizer: Tokenizer, probes: list[list[float]]) -> None:
    """Write the export whole or not at all: in a new directory, then renamed into place."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}-"))
    except OSError as error:
        logger.debug("the ONNX export is not kept: %s", error)
        return
    try:
        (staging / "model.onnx").write_bytes(onnx)
        tokenizer.save(str(staging / "tokenizer.json"))
        (staging / "probes.json").write_text(json.dumps(probes))
        shutil.rmtree(directory, ignore_errors=True)  # one that no longer gave its probes
        staging.rename(directory)
    except OSError as error:  # a full disk, or another process kept its export first
        logger.debug("the ONNX export is not kept: %s", error)
        shutil.rmtree(staging, ignore_errors=True)


def _session(model: str | bytes, *, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle threads that spin for the next batch would take cores from the turns meanwhile.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _mean(hidden: numpy.ndarray, mask: numpy.ndarray) -> numpy.ndarray:
    weights = mask[..., None].astype(hidden.dtype)
    return (hidden * weights).sum(axis=1) / weights.sum(axis=1).clip(min=1e-9)


def _normalized(vectors: numpy.ndarray) -> numpy.ndarray:
    import numpy as np

    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)


def _close(found: Sequence[Sequence[float]], expected: Sequence[Sequence[float]]) -> bool:
    if len(found) != len(expected):
        return False
    pairs = zip(found, expected, strict=True)
    return all(
        len(got) == len(want) and all(abs(a - b) <= TOLERANCE for a, b in zip(got, want, strict=True))
        for got, want in pairs
    )
