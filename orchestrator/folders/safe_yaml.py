"""YAML from a tool folder, with bounds: a few hundred bytes must not cost gigabytes.

PyYAML turns an alias into a shared reference, so loading a "billion laughs"
document is quick; it is everything after (validation, JSON, printing) that
walks the expanded tree and never ends. So the node graph is measured as it
would expand, before anything is built from it: too many nodes, too deep a
nesting or an alias that contains itself is refused. The nesting is measured
first on the flat stream of parser events: libyaml's composer recurses in C
and would crash the process on a few kilobytes of `[[[[...`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from orchestrator.errors import YamlTooLargeError

# libyaml's loader when PyYAML was built with it: many times faster with many folders.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_NODES = 100_000  # scalars, lists and mappings, with every alias expanded
MAX_DEPTH = 64


def load_bounded(text: str, *, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> object:
    """The document in `text` as Python values (safe tags only), within the bounds."""
    _check_nesting(text, max_depth=max_depth)
    loader = _SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _Measure(max_nodes=max_nodes, max_depth=max_depth).size(node, depth=1)
        return loader.construct_document(node)
    except RecursionError:  # the pure-Python composer on very deep nesting
        raise YamlTooLargeError(f"nested more than {max_depth} levels deep") from None
    finally:
        loader.dispose()


def _check_nesting(text: str, *, max_depth: int) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=_SAFE_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                raise YamlTooLargeError(f"nested more than {max_depth} levels deep")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


@dataclass
class _Measure:
    """Counts nodes as if every alias were copied out, visiting each shared node once."""

    max_nodes: int
    max_depth: int
    known: dict[int, tuple[int, int]] = field(default_factory=dict)  # id -> (size, height)
    open: set[int] = field(default_factory=set)

    def size(self, node: Node, *, depth: int) -> tuple[int, int]:
        if id(node) in self.open:
            raise YamlTooLargeError("an alias refers to a node that contains it")
        size, height = self.known.get(id(node)) or self._measure(node, depth=depth)
        if depth + height - 1 > self.max_depth:
            raise YamlTooLargeError(f"nested more than {self.max_depth} levels deep")
        return size, height

    def _measure(self, node: Node, *, depth: int) -> tuple[int, int]:
        if depth > self.max_depth:
            raise YamlTooLargeError(f"nested more than {self.max_depth} levels deep")
        self.open.add(id(node))
        size, height = 1, 1
        for child in _children(node):
            child_size, child_height = self.size(child, depth=depth + 1)
            size += child_size
            height = max(height, child_height + 1)
            if size > self.max_nodes:
                raise YamlTooLargeError(
                    f"expands to more than {self.max_nodes:,} values (aliases counted as copies)"
                )
        self.open.discard(id(node))
        self.known[id(node)] = (size, height)
        return size, height


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []
