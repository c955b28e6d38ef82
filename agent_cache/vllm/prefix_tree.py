"""What the router sent where: a bounded prefix tree over chained block hashes.

vLLM caches a prompt in blocks whose hashes chain their parent's, so a block's hash
names the whole prefix before it. The router cannot compute vLLM's hashes (they need the
token ids and the server's seed), but it can do the same over what it sends: the prompt
is rendered to canonical text (every message, system included, in order), cut into
blocks of ``block_chars`` characters (about 16 tokens at 4 characters a token; token-id
prompts are cut into 16-token blocks), and each block is hashed with its parent's hash.
A set of chained hashes is a radix tree in flat form: a prompt's longest prefix sent to a
replica is the number of its leading hashes that replica holds.

Each replica's hashes expire like vLLM's cache: least recently sent first, as soon as
the replica holds more than its capacity, and the tail of a chain before its head (a
prompt's blocks are touched leaf first, so the shared system prompt stays longest).

Example:
    >>> tree = PrefixTree(2, capacity_blocks=100)
    >>> a = prefix_blocks("S" * 256 + "doc one " * 40)
    >>> tree.insert(0, a)
    >>> tree.match(prefix_blocks("S" * 256 + "doc one " * 40 + "question?")) == [len(a), 0]
    True
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agent_cache.errors import ConfigurationError
from agent_cache.keys import canonical_json

__all__ = ["DEFAULT_BLOCK_CHARS", "PrefixTree", "prefix_blocks", "render_for_prefix"]

#: Characters per router-side block: about one vLLM block of 16 tokens.
DEFAULT_BLOCK_CHARS = 64
#: Tokens per block for token-id prompts (vLLM's default block size).
TOKEN_BLOCK = 16


def _text(content: Any) -> str:
    return content if isinstance(content, str) else canonical_json(content)


def render_for_prefix(prompt: str | Sequence[Mapping[str, Any]], tools: Any = None) -> str:
    """The canonical text whose prefixes stand for the rendered prompt's prefixes.

    Chat messages become ``role \\x1f content \\x1e`` in order (tools first, as chat
    templates render them), so a conversation's next turn extends its previous turn's
    text exactly as the chat template extends its tokens.

    Example:
        >>> render_for_prefix([{"role": "user", "content": "hi"}])
        'user\\x1fhi\\x1e'
    """
    if isinstance(prompt, str):
        return prompt
    head = f"tools\x1f{canonical_json(tools)}\x1e" if tools else ""
    return head + "".join(f"{m.get('role', '')}\x1f{_text(m.get('content'))}\x1e" for m in prompt)


def prefix_blocks(
    prompt: str | Sequence[Mapping[str, Any]] | Sequence[int],
    *,
    namespace: str | None = None,
    block_chars: int = DEFAULT_BLOCK_CHARS,
    tools: Any = None,
) -> list[int]:
    """Chained hashes of a prompt's full blocks (a partial last block is not hashed).

    Args:
        prompt: A text prompt, chat messages, or token ids.
        namespace: Goes into the first block, as ``cache_salt`` does in vLLM: prompts
            of different namespaces share no block.
        block_chars: Characters per block (text and chat); token ids use 16 per block.
        tools: Tool definitions sent with chat messages (rendered first).

    Returns:
        One 64-bit hash per full block, each committing to the whole prefix before it.

    Example:
        >>> a, b = prefix_blocks("x" * 130), prefix_blocks("x" * 128 + "yy")
        >>> len(a), a == b, prefix_blocks("x" * 130, namespace="t")[0] == a[0]
        (2, True, False)
    """
    if block_chars < 1:
        raise ConfigurationError("block_chars must be >= 1")
    items: list[Any] = [] if isinstance(prompt, str) else list(prompt)
    pieces: list[bytes]
    if items and all(isinstance(x, int) for x in items):
        ids = cast(list[int], items)
        pieces = [
            b",".join(str(t).encode() for t in ids[i : i + TOKEN_BLOCK])
            for i in range(0, len(ids) - TOKEN_BLOCK + 1, TOKEN_BLOCK)
        ]
    else:
        text = render_for_prefix(
            prompt if isinstance(prompt, str) else cast(list[Mapping[str, Any]], items), tools
        )
        # cut the text, not the bytes, so a block never splits a character
        pieces = [
            text[i : i + block_chars].encode("utf-8", "surrogatepass")
            for i in range(0, len(text) - block_chars + 1, block_chars)
        ]
    out: list[int] = []
    parent = hashlib.blake2b((namespace or "").encode() + b"\x00", digest_size=8).digest()
    for piece in pieces:
        parent = hashlib.blake2b(parent + piece, digest_size=8).digest()
        out.append(int.from_bytes(parent, "big"))
    return out


class PrefixTree:
    """Per replica, the block hashes sent to it, bounded by its cache's capacity.

    Not locked: the router calls it under its own lock.

    Args:
        n: Number of replicas.
        capacity_blocks: Blocks each replica can hold (one number for all, or one per
            replica); None: unbounded. Change it later with :meth:`set_capacity`.

    Example:
        >>> tree = PrefixTree(1, capacity_blocks=2)
        >>> tree.insert(0, [1, 2, 3])  # leaf first: 3, 2, 1; the oldest (3) expires
        >>> tree.match([1, 2, 3]), tree.size(0)
        ([2], 2)
    """

    def __init__(
        self, n: int, *, capacity_blocks: int | Sequence[int | None] | None = None
    ) -> None:
        if n < 1:
            raise ConfigurationError("a prefix tree needs at least one replica")
        caps = (
            list(capacity_blocks)
            if isinstance(capacity_blocks, Sequence)
            else [capacity_blocks] * n
        )
        if len(caps) != n:
            raise ConfigurationError("capacity_blocks needs one entry per replica")
        self.n = n
        self._capacity: list[int | None] = []
        for c in caps:
            self._capacity.append(self._checked(c))
        self._lru: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(n)]
        self._holders: dict[int, set[int]] = {}

    @staticmethod
    def _checked(capacity: int | None) -> int | None:
        if capacity is not None and capacity < 1:
            raise ConfigurationError("capacity_blocks must be >= 1")
        return capacity

    def capacity(self, replica: int) -> int | None:
        """The blocks ``replica`` is assumed to hold at most."""
        return self._capacity[replica]

    def set_capacity(self, replica: int, capacity_blocks: int | None) -> None:
        """Change a replica's capacity (e.g. learned from ``/metrics``); expires the
        excess at once."""
        self._capacity[replica] = self._checked(capacity_blocks)
        self._expire(replica)

    def size(self, replica: int) -> int:
        """Blocks recorded for ``replica``."""
        return len(self._lru[replica])

    def match(self, hashes: Sequence[int]) -> list[int]:
        """Per replica, how many leading blocks of ``hashes`` it holds.

        The walk stops for a replica at its first missing block (as vLLM's lookup does),
        and stops altogether when no replica continues.
        """
        matched = [0] * self.n
        alive = set(range(self.n))
        for depth, h in enumerate(hashes):
            holders = self._holders.get(h)
            if not holders:
                break
            alive &= holders
            if not alive:
                break
            for r in alive:
                matched[r] = depth + 1
        return matched

    def insert(self, replica: int, hashes: Sequence[int]) -> None:
        """Record that ``hashes`` were sent to ``replica`` (now its most recent)."""
        lru = self._lru[replica]
        for h in reversed(hashes):  # leaf first, so the chain's tail expires first
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
                self._holders.setdefault(h, set()).add(replica)
        self._expire(replica)

    def remove(self, replica: int, hashes: Sequence[int]) -> None:
        """Forget blocks of ``replica`` (e.g. announced evicted)."""
        lru = self._lru[replica]
        for h in hashes:
            if lru.pop(h, 0) is None:
                self._drop(h, replica)

    def clear(self, replica: int) -> None:
        """Forget everything about ``replica`` (it restarted, or its cache was reset)."""
        for h in self._lru[replica]:
            self._drop(h, replica)
        self._lru[replica].clear()

    def _expire(self, replica: int) -> None:
        cap = self._capacity[replica]
        lru = self._lru[replica]
        while cap is not None and len(lru) > cap:
            h, _ = lru.popitem(last=False)
            self._drop(h, replica)

    def _drop(self, h: int, replica: int) -> None:
        holders = self._holders.get(h)
        if holders is not None:
            holders.discard(replica)
            if not holders:
                del self._holders[h]
