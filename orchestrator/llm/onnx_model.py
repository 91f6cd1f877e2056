"""The local sentence-transformers model exported to ONNX, with 8-bit weights, on ONNX Runtime.

For a sentence or two, most of BERT's time in PyTorch goes to stepping through
its modules, and much of the rest to reading 40 MB of float weights for a few
tokens' arithmetic. ONNX Runtime runs the exported graph in half torch's time
(3.6 against 7.0 ms for one sentence on one core here), and with the weights
quantized to 8 bits (dynamic quantization, a scale per output channel, as the
Sentence Transformers exports on the Hugging Face hub) in under half that
again (1.9 against 4.1 ms for a question of ten words). The vectors move a
little: cosine 0.975-0.999 to the float model's over 3000 sentences; finding
each of them from a copy with 40% of its words dropped, the mean reciprocal
rank is 0.849 against the float model's 0.856, first place as often (0.80).

The graph is built once from the model's weights without torch (`built`, see
`bert_graph`; bit for bit the 8-bit model torch's exporter gave), or, where
sentence-transformers is installed and the weights are of a model the builder
does not know, exported from the loaded model (`exported`). Either float graph
is checked against `encode`'s vectors (within 1e-5: the builder's against the
probes' vectors shipped beside this module), the quantized one must agree with
them (cosine `AGREEMENT`), and it is kept in a directory with its tokenizer and
its own vectors of the probes; a later load reads it (a fraction of a second)
and checks the probes again. A model that fails the checks is left to the
model itself on torch, if there is one (float weights: torch's own 8-bit layers
move vectors far more).
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy
    import onnxruntime
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

Encode = Callable[[list[str]], list[list[float]]]


class SentenceModel(Protocol):
    """What this module and `model_process` use of a sentence-transformers `SentenceTransformer`."""

    def encode(
        self,
        sentences: list[str],
        *,
        batch_size: int = ...,
        normalize_embeddings: bool = ...,
        convert_to_numpy: bool = ...,
    ) -> numpy.ndarray: ...

    # Its torch modules, in order: torch is an optional install, absent where types are checked.
    def __iter__(self) -> Iterator[Any]: ...


PROBES = [
    "a",
    "a sentence of a few more words, and punctuation!",
    "ünïcödé テキスト",
    "long " * 400,  # past the model's 256 tokens: the truncation is the model's own
]
TOLERANCE = 1e-5
# A quantized model's probe vectors against the float model's: 0.975 is the least
# measured over 3000 sentences; 8-bit sums that overflow would come far below.
AGREEMENT = 0.95
SMALL_BATCH = 64  # fewer texts run on one core: the other cores stay the turns'
FILES = ("model.onnx", "tokenizer.json", "probes.json")


class OnnxEncoder:
    """`encode(texts, normalize_embeddings=True)` of a mean-pooling transformer, on ONNX Runtime.

    One text a run. With 8-bit weights a run's activations are quantized on a
    scale of their own, so in a batch a text's vector would depend on the texts
    beside it; and a batch is padded to its longest text, which costs more than
    the runs it saves (7.5 against 2.6 ms a text of twelve words, here). Many
    texts at once run on every core, one text on each.
    """

    def __init__(self, model: str | bytes, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._session = _session(model)  # a path, or the export itself when none is kept
        self._cores: ThreadPoolExecutor | None = None

    def __call__(self, texts: list[str]) -> list[list[float]]:
        if len(texts) < SMALL_BATCH or (os.cpu_count() or 1) == 1:
            return [self._one(text) for text in texts]
        if self._cores is None:  # a full batch: catching up, or re-embedding
            self._cores = ThreadPoolExecutor(os.cpu_count(), thread_name_prefix="onnx")
        return list(self._cores.map(self._one, texts))

    def _one(self, text: str) -> list[float]:
        import numpy as np

        encoded = self._tokenizer.encode(text)
        ids = np.array([encoded.ids], dtype=np.int64)
        mask = np.array([encoded.attention_mask], dtype=np.int64)
        (hidden,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask})
        if not isinstance(hidden, np.ndarray):  # the graph's one output is a dense tensor
            raise TypeError(f"the ONNX model gave {type(hidden).__name__}, not an array")
        weights = mask[0, :, None].astype(hidden.dtype)  # the text's tokens, not padding
        vector = (hidden[0] * weights).sum(axis=0) / max(float(weights.sum()), 1.0)
        return (vector / max(float(np.linalg.norm(vector)), 1e-12)).tolist()


def kept(directory: Path) -> OnnxEncoder | None:
    """The export kept in `directory`, if it is whole and still gives its probes' vectors."""
    if not all((directory / name).is_file() for name in FILES):
        return None
    try:
        from tokenizers import Tokenizer

        encoder = OnnxEncoder(
            str(directory / "model.onnx"),
            Tokenizer.from_file(str(directory / "tokenizer.json")),
        )
        expected = json.loads((directory / "probes.json").read_text())
        same = _close(encoder(PROBES), expected)
    except Exception as error:  # unreadable, or no ONNX Runtime: the model is loaded instead
        logger.debug("the kept ONNX export is not used: %s: %s", type(error).__name__, error)
        return None
    return encoder if same else None


def built(
    model: Path, *, expected: Sequence[Sequence[float]], keep_in: Path | None = None
) -> OnnxEncoder | None:
    """The Sentence Transformers model in directory `model` built as ONNX and quantized, without torch.

    `expected`: the vectors `encode` gives `PROBES` with these weights. None
    when the model is not one `bert_graph` builds, or a check fails.
    """
    try:
        from orchestrator.llm.bert_graph import bert_graph, sentence_model

        max_length = sentence_model(model)
        onnx = bert_graph(model)
        tokenizer = _model_tokenizer(model, max_length=max_length)
    except Exception as error:  # an architecture this does not know, or no onnx package
        logger.debug("the embedding model is not built: %s: %s", type(error).__name__, error)
        return None
    return _checked(onnx, tokenizer, expected=expected, keep_in=keep_in)


def exported(model: SentenceModel, *, keep_in: Path | None = None) -> OnnxEncoder | None:
    """`model` (a SentenceTransformer) exported to ONNX and quantized, or None if it cannot be.

    When the float export gives the vectors `model.encode` gives and the
    quantized one agrees with them, the quantized one is kept in `keep_in` (if
    given) for `kept` to read next time.
    """
    try:
        onnx, tokenizer = _export(model)
        expected = model.encode(PROBES, normalize_embeddings=True, convert_to_numpy=True).tolist()
    except Exception as error:  # an architecture, or a torch, this does not know
        logger.debug("the embedding model is not exported: %s: %s", type(error).__name__, error)
        return None
    return _checked(onnx, tokenizer, expected=expected, keep_in=keep_in)


def _checked(
    onnx: bytes, tokenizer: Tokenizer, *, expected: Sequence[Sequence[float]], keep_in: Path | None
) -> OnnxEncoder | None:
    """The quantized `onnx`, if the float one gives `expected` and the quantized one agrees; kept."""
    try:
        if not _close(OnnxEncoder(onnx, tokenizer)(PROBES), expected):
            logger.debug("the float ONNX graph does not give the model's vectors")
            return None
        quantized = _quantized(onnx)
        encoder = OnnxEncoder(quantized, tokenizer)
        probes = encoder(PROBES)
    except Exception as error:  # no ONNX Runtime, or a graph it does not run
        logger.debug("the ONNX graph is not used: %s: %s", type(error).__name__, error)
        return None
    if not agree(probes, expected):
        return None
    if keep_in is not None:
        _keep(keep_in, onnx=quantized, tokenizer=tokenizer, probes=probes)
    return encoder


def _model_tokenizer(model: Path, *, max_length: int) -> Tokenizer:
    """The model's fast tokenizer, cut at `max_length` tokens and padding a batch to its longest.

    tokenizer.json pads and truncates to 128, fixed; `encode` asks for the
    longest text of each batch, cut at the model's own limit.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    padding = tokenizer.padding or {"pad_id": 0, "pad_token": "[PAD]"}
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=padding["pad_id"], pad_token=padding["pad_token"])
    return tokenizer


def agree(found: Sequence[Sequence[float]], expected: Sequence[Sequence[float]]) -> bool:
    """Whether each of a quantized model's unit vectors points where the float model's does."""
    if len(found) != len(expected):
        return False
    pairs = zip(found, expected, strict=True)
    return all(
        len(got) == len(want) and sum(a * b for a, b in zip(got, want, strict=True)) >= AGREEMENT
        for got, want in pairs
    )


def _quantized(onnx: bytes) -> bytes:
    """The graph with its matrix multiplications' weights in 8 bits, one scale per column."""
    import onnx as onnx_format
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="orchestrator-onnx-") as directory:
        target = Path(directory) / "model.onnx"
        # 7-bit weights (reduce_range): 8-bit products summed in pairs overflow 16 bits
        # on CPUs without VNNI instructions; measured here, as close to the float model.
        quantize_dynamic(
            onnx_format.load_from_string(onnx),
            target,
            op_types_to_quantize=["MatMul"],
            per_channel=True,
            reduce_range=True,
            weight_type=QuantType.QInt8,
        )
        return target.read_bytes()


def _export(model: SentenceModel) -> tuple[bytes, Tokenizer]:
    import torch  # pyright: ignore[reportMissingImports]  # optional: absent where types are checked
    from tokenizers import Tokenizer

    transformer, pooling, normalize = model
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


def _hidden_states(auto_model: Callable[..., Sequence[object]]) -> object:
    """A module giving the transformer's last hidden states for (input ids, attention mask)."""
    import torch  # pyright: ignore[reportMissingImports]  # optional: absent where types are checked

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


def _session(model: str | bytes) -> onnxruntime.InferenceSession:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    # One core a run: a text's few tokens gain nothing from more, and the turns need them.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _close(found: Sequence[Sequence[float]], expected: Sequence[Sequence[float]]) -> bool:
    if len(found) != len(expected):
        return False
    pairs = zip(found, expected, strict=True)
    return all(
        len(got) == len(want) and all(abs(a - b) <= TOLERANCE for a, b in zip(got, want, strict=True))
        for got, want in pairs
    )
