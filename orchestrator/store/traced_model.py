"""A sentence-transformers model's `encode`, with its transformer traced by TorchScript.

For a sentence or two, most of BERT's time on the CPU goes to stepping through
its modules in Python, not to arithmetic; the traced graph runs them without
that. Used by the model's process when the model is a transformer with mean
pooling and normalized output (all-MiniLM-L6-v2) and the traced encoding gives
the vectors `encode` gives (checked on load); otherwise `encode` itself serves.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

Encode = Callable[[list[str]], list[list[float]]]
PROBES = ["a", "a sentence of a few more words, and punctuation!", "ünïcödé テキスト"]
TOLERANCE = 1e-5


def traced_encode(model: object, *, batch_size: int) -> Encode | None:
    """`model.encode(texts, normalize_embeddings=True)` traced, or None where it cannot stand in."""
    try:
        encode = _traced(model, batch_size=batch_size)
        expected = model.encode(PROBES, normalize_embeddings=True, convert_to_numpy=True).tolist()  # type: ignore[attr-defined]
        same = _close(encode(PROBES), expected) and _close(encode(PROBES[1:2]), expected[1:2])
    except Exception as error:  # an architecture this does not know: encode serves
        logger.debug("the embedding model is not traced: %s: %s", type(error).__name__, error)
        return None
    return encode if same else None


def _traced(model: object, *, batch_size: int) -> Encode:
    import torch

    transformer, pooling, normalize = model  # type: ignore[misc]  # a SentenceTransformer
    if pooling.pooling_mode != "mean" or type(normalize).__name__ != "Normalize":
        raise TypeError(f"pooling {pooling.pooling_mode!r}, then {type(normalize).__name__}")
    tokenizer, max_length = transformer.tokenizer, transformer.max_seq_length

    def tokens(texts: list[str]) -> dict[str, torch.Tensor]:
        return tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")

    probe = tokens(PROBES)
    # TorchScript warns of branches taken on the probe's values, and of its own deprecation
    # (torch.compile is slower to start than a chat): the check on load is what vouches.
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.freeze(
            torch.jit.trace(
                _hidden_states(transformer.auto_model),
                (probe["input_ids"], probe["attention_mask"]),
                check_trace=False,
            )
        )

    def encode(texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), batch_size):
            batch = tokens(texts[start : start + batch_size])
            with torch.inference_mode():
                hidden = traced(batch["input_ids"], batch["attention_mask"])
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # mean pooling
                vectors += torch.nn.functional.normalize(pooled, p=2, dim=1).tolist()
        return vectors

    return encode


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


def _close(found: Sequence[Sequence[float]], expected: Sequence[Sequence[float]]) -> bool:
    if len(found) != len(expected):
        return False
    pairs = zip(found, expected, strict=True)
    return all(abs(a - b) <= TOLERANCE for got, want in pairs for a, b in zip(got, want, strict=True))
