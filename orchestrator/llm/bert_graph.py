"""A BERT sentence model's ONNX graph, built from its safetensors weights with numpy.

What torch's exporter would write for the transformer of a Sentence
Transformers model (word, position and token-type embeddings, LayerNorm, then
each layer's masked self-attention and GELU feed-forward, each added to its
input and normalized), made without torch: the weights are read with the
`safetensors` package's numpy API and the nodes written with `onnx.helper`.
Its output is the last hidden states, as the export's is; pooling and
normalizing stay in `onnx_model.OnnxEncoder`. Each dense layer is a MatMul with
the transposed weight as an initializer, as in torch's export, so the 8-bit
quantization that follows makes the same integers from the same weights.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UnknownModelError

if TYPE_CHECKING:
    import numpy
    import onnx

OPSET = 17  # LayerNormalization, as torch's export used
INPUTS = ("input_ids", "attention_mask")
OUTPUT = "hidden"
MEAN_POOLED = ["sentence_transformers.models.Pooling", "sentence_transformers.models.Normalize"]


@dataclass(frozen=True)
class BertShape:
    """What of a BERT model's config.json the graph needs."""

    hidden: int
    heads: int
    layers: int
    epsilon: float

    @classmethod
    def read(cls, model: Path) -> BertShape:
        """The shape in `model`/config.json; a model that is not a plain BERT is refused."""
        config = json.loads((model / "config.json").read_text())
        known = (
            config.get("model_type") == "bert"
            and config.get("hidden_act") == "gelu"
            and config.get("position_embedding_type", "absolute") == "absolute"
        )
        if not known:
            raise UnknownModelError(f"not a BERT model this builds: {model / 'config.json'}")
        return cls(
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            epsilon=float(config["layer_norm_eps"]),
        )


def sentence_model(model: Path) -> int:
    """The longest text in tokens of the Sentence Transformers model in `model`.

    Refused unless it is what `onnx_model.OnnxEncoder` computes: the
    transformer's tokens averaged over the attention mask, then normalized.
    """
    modules = [entry["type"] for entry in json.loads((model / "modules.json").read_text())]
    pooling = json.loads((model / "1_Pooling" / "config.json").read_text())
    modes = {key for key, on in pooling.items() if key.startswith("pooling_mode_") and on}
    if modules[1:] != MEAN_POOLED or modes != {"pooling_mode_mean_tokens"}:
        raise UnknownModelError(f"not mean pooling, then normalizing: {modules[1:]}, {sorted(modes)}")
    return int(json.loads((model / "sentence_bert_config.json").read_text())["max_seq_length"])


def bert_graph(model: Path) -> bytes:
    """The serialized ONNX model of the transformer in directory `model` (float weights)."""
    import onnx
    from safetensors.numpy import load_file

    shape = BertShape.read(model)
    weights = load_file(str(model / "model.safetensors"))
    builder = _Builder(weights, shape)
    hidden = builder.embeddings()
    bias = builder.attention_bias()
    for layer in range(shape.layers):
        hidden = builder.layer(layer, hidden, bias)
    builder.nodes.append(onnx.helper.make_node("Identity", [hidden], [OUTPUT]))
    graph = onnx.helper.make_graph(
        builder.nodes,
        "bert",
        [_int_input(name) for name in INPUTS],
        [onnx.helper.make_tensor_value_info(OUTPUT, onnx.TensorProto.FLOAT, ["texts", "tokens", shape.hidden])],
        initializer=builder.initializers,
    )
    built = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(built)
    return built.SerializeToString()


def _int_input(name: str) -> onnx.ValueInfoProto:
    import onnx

    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.INT64, ["texts", "tokens"])


class _Builder:
    """Appends nodes and initializers; each method returns the name of its output."""

    def __init__(self, weights: dict[str, numpy.ndarray], shape: BertShape) -> None:
        self.weights = weights
        self.shape = shape
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names = 0

    def embeddings(self) -> str:
        """Word + token type 0 + position embeddings, normalized."""
        words = self._node("Gather", [self._weight("embeddings.word_embeddings.weight"), "input_ids"])
        # Every token is of type 0: a single sentence, as `encode` gives it.
        first_type = self.weights["embeddings.token_type_embeddings.weight"][0]
        typed = self._node("Add", [words, self._constant(first_type)])
        length = self._node("Gather", [self._node("Shape", ["input_ids"]), self._int(1)], axis=0)
        positions = self._node("Range", [self._int(0), length, self._int(1)])
        placed = self._node("Gather", [self._weight("embeddings.position_embeddings.weight"), positions])
        return self._layer_norm(self._node("Add", [typed, placed]), "embeddings.LayerNorm")

    def attention_bias(self) -> str:
        """(texts, 1, 1, tokens): 0 where the mask is 1, the float minimum where it is 0 (padding)."""
        import numpy as np
        import onnx

        mask = self._node("Cast", ["attention_mask"], to=onnx.TensorProto.FLOAT)
        masked_out = self._node("Sub", [self._constant(np.array(1.0, np.float32)), mask])
        bias = self._node("Mul", [masked_out, self._constant(np.array(np.finfo(np.float32).min, np.float32))])
        return self._node("Unsqueeze", [bias, self._ints([1, 2])])

    def layer(self, index: int, hidden: str, bias: str) -> str:
        """One encoder layer: self-attention, then the feed-forward block, each add & norm."""
        prefix = f"encoder.layer.{index}"
        attended = self._attention(f"{prefix}.attention.self", hidden, bias)
        projected = self._dense(f"{prefix}.attention.output.dense", attended)
        hidden = self._layer_norm(self._node("Add", [projected, hidden]), f"{prefix}.attention.output.LayerNorm")
        widened = self._gelu(self._dense(f"{prefix}.intermediate.dense", hidden))
        narrowed = self._dense(f"{prefix}.output.dense", widened)
        return self._layer_norm(self._node("Add", [narrowed, hidden]), f"{prefix}.output.LayerNorm")

    def _attention(self, prefix: str, hidden: str, bias: str) -> str:
        import numpy as np

        heads, width = self.shape.heads, self.shape.hidden // self.shape.heads
        split = self._ints([0, 0, heads, width])  # (texts, tokens, heads, width): 0 keeps a size
        query, key, value = (
            self._node("Reshape", [self._dense(f"{prefix}.{part}", hidden), split])
            for part in ("query", "key", "value")
        )
        # Both scaled by width ** -0.25 before their product, as torch's attention does: the
        # same floats into each 8-bit quantization give the same integers as its export.
        root = self._constant(np.array(width**-0.25, np.float32))
        query = self._node("Mul", [self._node("Transpose", [query], perm=[0, 2, 1, 3]), root])
        key = self._node("Mul", [self._node("Transpose", [key], perm=[0, 2, 3, 1]), root])
        value = self._node("Transpose", [value], perm=[0, 2, 1, 3])
        scores = self._node("MatMul", [query, key])
        weights = self._node("Softmax", [self._node("Add", [scores, bias])], axis=-1)
        mixed = self._node("Transpose", [self._node("MatMul", [weights, value])], perm=[0, 2, 1, 3])
        return self._node("Reshape", [mixed, self._merged_shape(hidden)])

    def _merged_shape(self, hidden: str) -> str:
        """(texts, tokens, hidden) read from `hidden` at run time, as torch's export does.

        Given as constants, ONNX Runtime would know the heads' output has the
        shape of the layer's input and fuse the add & norm after it into one
        kernel, whose rounding differs: the 8-bit model's vectors would then move
        from the ones stored from torch's export by up to 0.02.
        """
        size = self._node("Shape", [hidden])
        texts, tokens = (
            self._node("Unsqueeze", [self._node("Gather", [size, self._int(axis)], axis=0), self._ints([0])])
            for axis in (0, 1)
        )
        return self._node("Concat", [texts, tokens, self._ints([self.shape.hidden])], axis=0)

    def _dense(self, prefix: str, x: str) -> str:
        weight = self.weights[f"{prefix}.weight"]  # (out, in), as torch keeps it
        product = self._node("MatMul", [x, self._constant(weight.T.copy(), name=f"{prefix}.weight")])
        return self._node("Add", [self._weight(f"{prefix}.bias"), product])  # torch's order

    def _gelu(self, x: str) -> str:
        """The exact GELU, x * (1 + erf(x / sqrt 2)) / 2, as BERT's `gelu`."""
        import numpy as np

        erf = self._node("Erf", [self._node("Div", [x, self._constant(np.array(math.sqrt(2), np.float32))])])
        shifted = self._node("Add", [erf, self._constant(np.array(1.0, np.float32))])
        return self._node("Mul", [self._node("Mul", [x, shifted]), self._constant(np.array(0.5, np.float32))])

    def _layer_norm(self, x: str, prefix: str) -> str:
        scale, shift = self._weight(f"{prefix}.weight"), self._weight(f"{prefix}.bias")
        return self._node("LayerNormalization", [x, scale, shift], axis=-1, epsilon=self.shape.epsilon)

    def _weight(self, name: str) -> str:
        return self._constant(self.weights[name], name=name)

    def _ints(self, values: list[int]) -> str:
        import numpy as np

        return self._constant(np.array(values, np.int64))

    def _int(self, value: int) -> str:
        import numpy as np

        return self._constant(np.array(value, np.int64))

    def _constant(self, value: numpy.ndarray, *, name: str | None = None) -> str:
        from onnx import numpy_helper

        name = name or self._name("const")
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def _node(self, op: str, inputs: list[str], **attributes: object) -> str:
        import onnx

        output = self._name(op)
        node = onnx.helper.make_node(op, inputs, [output], name=output)
        # Added as `make_node(**attributes)` would (sorted, None left out), whose own
        # keywords (`domain`, `doc_string`) an attribute could otherwise be taken for.
        node.attribute.extend(
            onnx.helper.make_attribute(key, value)
            for key, value in sorted(attributes.items())
            if value is not None
        )
        self.nodes.append(node)
        return output

    def _name(self, kind: str) -> str:
        self._names += 1
        return f"{kind}_{self._names}"
