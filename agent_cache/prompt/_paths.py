"""A trie of the document orders already sent, for reusing them (not locked; the owner locks).

Every order handed out is inserted. A new request's documents first follow the longest
path of the trie made only of its own documents (ties: the most used), so its prompt
repeats an already-cached sequence of documents for as long as possible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["PathTrie"]

_EXPLORE_LIMIT = 4096


@dataclass
class _Node:
    count: float = 0.0
    children: dict[str, _Node] = field(default_factory=dict)


class PathTrie:
    """Counts of document sequences; finds the best known path through a set of documents.

    Example:
        >>> t = PathTrie(max_nodes=100)
        >>> t.add(["a", "b", "c"]); t.add(["x", "y"])
        >>> t.match({"c", "b", "a", "z"})
        ['a', 'b', 'c']
    """

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self._root = _Node()
        self._nodes = 0

    def __len__(self) -> int:
        return self._nodes

    def match(self, keys: set[str]) -> list[str]:
        """The longest known path using only ``keys`` (ties: the most used edges)."""
        budget = [_EXPLORE_LIMIT]

        def best(node: _Node, left: set[str]) -> tuple[int, float, list[str]]:
            top: tuple[int, float, list[str]] = (0, 0.0, [])
            for k, child in node.children.items():
                if k not in left or budget[0] <= 0:
                    continue
                budget[0] -= 1
                depth, _, path = best(child, left - {k})
                cand = (depth + 1, child.count, [k, *path])
                if (cand[0], cand[1]) > (top[0], top[1]):
                    top = cand
            return top

        return best(self._root, set(keys))[2]

    def add(self, path: Sequence[str], weight: float = 1.0) -> None:
        """Count one use of ``path`` (and of each of its prefixes)."""
        node = self._root
        for k in path:
            child = node.children.get(k)
            if child is None:
                child = node.children[k] = _Node()
                self._nodes += 1
            child.count += weight
            node = child
        if self._nodes > self.max_nodes:
            self._shrink()

    def _shrink(self) -> None:
        """Halve every count and drop what falls under one use, until under the cap."""
        while self._nodes > self.max_nodes:
            self._nodes = self._halve(self._root.children)

    def _halve(self, children: dict[str, _Node]) -> int:
        kept = 0
        for k in list(children):
            child = children[k]
            child.count /= 2.0
            if child.count < 1.0:
                del children[k]
            else:
                kept += 1 + self._halve(child.children)
        return kept

    def clear(self) -> None:
        self._root = _Node()
        self._nodes = 0

    def paths(self) -> Iterable[list[str]]:
        """Every root-to-leaf path (for inspection and tests)."""
        stack: list[tuple[_Node, list[str]]] = [(self._root, [])]
        while stack:
            node, prefix = stack.pop()
            if not node.children and prefix:
                yield prefix
            for k, child in node.children.items():
                stack.append((child, [*prefix, k]))
