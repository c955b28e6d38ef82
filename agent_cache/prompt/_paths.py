"""A trie of the document orders sent lately, for reusing them (not locked; the owner locks).

Every order handed out is inserted, stamped with the call that sent it. A new request's
documents first walk the trie greedily: at each step, among the documents sent after
this prefix within the last ``window`` calls that the request holds, the best ranked
one (the most popular), so its prompt repeats a prefix that is likely still in the KV
cache, and the most shared one of those. Orders older than ``window`` calls are ignored
and pruned: the cache has evicted them by then, and following them would only split the
stream into diverging orders (the former trie, which followed the longest path ever
sent, lost up to 24 % to the ranking alone on the stream sweep of ``bench prefix``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from agent_cache.errors import ConfigurationError

__all__ = ["PathTrie"]


@dataclass
class _Node:
    last: int = -1  # the call that last sent this prefix
    children: dict[str, _Node] = field(default_factory=dict)


class PathTrie:
    """Recently sent document sequences; finds a fresh known path through a set.

    Args:
        max_nodes: Nodes kept at most (the oldest are pruned first).
        window: Calls after which a sent order is forgotten.

    Example:
        >>> t = PathTrie(max_nodes=100, window=10)
        >>> t.add(["a", "b", "c"], step=1); t.add(["a", "c"], step=2)
        >>> rank = {"a": 0, "c": 1, "b": 2}
        >>> t.match({"c", "b", "a", "z"}, rank, step=3)  # after "a": "c" ranks above "b"
        ['a', 'c']
        >>> t.match({"a", "b"}, rank, step=30)  # both orders are too old now
        []
    """

    def __init__(self, max_nodes: int, window: int = 64) -> None:
        if max_nodes < 1 or window < 1:
            raise ConfigurationError("max_nodes and window must be >= 1")
        self.max_nodes = max_nodes
        self.window = window
        self._root = _Node()
        self._nodes = 0
        self._pruned_at = 0

    def __len__(self) -> int:
        return self._nodes

    def match(self, keys: set[str], rank: Mapping[str, int], step: int) -> list[str]:
        """A path through ``keys`` sent within the window before call ``step``: at each
        step the fresh next document that ranks best (``rank``: lower first)."""
        since = step - self.window
        node, left = self._root, set(keys)
        path: list[str] = []
        worst = len(rank)
        while True:
            best: tuple[int, str] | None = None
            for k, child in node.children.items():
                if k in left and child.last >= since:
                    cand = (rank.get(k, worst), k)
                    if best is None or cand < best:
                        best = cand
            if best is None:
                return path
            k = best[1]
            path.append(k)
            left.discard(k)
            node = node.children[k]

    def add(self, path: Sequence[str], step: int) -> None:
        """Record that ``path`` (and each of its prefixes) was sent at call ``step``."""
        node = self._root
        for k in path:
            child = node.children.get(k)
            if child is None:
                child = node.children[k] = _Node()
                self._nodes += 1
            child.last = step
            node = child
        if step - self._pruned_at >= self.window:
            self._pruned_at = step
            self._nodes = self._prune(self._root, step - self.window)
        horizon = self.window
        while self._nodes > self.max_nodes and horizon > 0:
            horizon //= 2
            self._nodes = self._prune(self._root, step - horizon)

    def _prune(self, node: _Node, since: int) -> int:
        """Drop every node last sent before ``since``; returns the nodes kept under ``node``.

        A child is never fresher than its parent (adding a path stamps all its prefixes),
        so a stale node's whole subtree is stale too.
        """
        kept = 0
        for k in list(node.children):
            child = node.children[k]
            if child.last < since:
                del node.children[k]
            else:
                kept += 1 + self._prune(child, since)
        return kept

    def clear(self) -> None:
        self._root = _Node()
        self._nodes = 0
        self._pruned_at = 0

    def paths(self) -> Iterable[list[str]]:
        """Every root-to-leaf path (for inspection and tests)."""
        stack: list[tuple[_Node, list[str]]] = [(self._root, [])]
        while stack:
            node, prefix = stack.pop()
            if not node.children and prefix:
                yield prefix
            for k, child in node.children.items():
                stack.append((child, [*prefix, k]))
