"""An offline model of vLLM V1 automatic prefix caching (full-attention models).

It follows vLLM's rules (``vllm/v1/core/kv_cache_utils.py``, ``kv_cache_manager.py``,
``block_pool.py``), one request after another:

* Only **full blocks** of ``block_size`` tokens are hashed; each block's hash chains its
  parent's, so a block hash commits to the whole prefix before it. ``cache_salt`` (and a
  LoRA name) enter the hash: the salt in block 0 only, whence it spreads down the chain.
* A lookup walks the request's block hashes in order and **stops at the first miss**.
* At most ``(n - 1) // block_size`` blocks can hit: the **last prompt token is always
  recomputed** (its logits are needed), so a repeated 32-token prompt reports 16.
* Blocks are cached as soon as they are full; identical blocks are not de-duplicated.
  That includes blocks filled by **generated** tokens (every token but the last sampled
  one has its KV computed), so the next turn of a chat, which repeats the previous
  answer, hits them too: pass the answer's token ids (``output_token_ids``).
* Finished requests free their blocks **in reverse order** to the tail of an LRU queue
  whose head is evicted next, so a chain's **tail is evicted first**; blocks that hold no
  hash (partial blocks) go to the head (vLLM PR #42656).
* The usable pool is ``capacity_blocks - 1`` (block 0 is vLLM's reserved null block).

``cached_tokens`` per request is what vLLM reports in
``usage.prompt_tokens_details.cached_tokens``; ``hit_rate`` is what
``vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total`` gives.
Not modelled: hybrid (Mamba / sliding-window) models, KV connectors, preemption,
concurrency, speculative decoding, multimodal keys.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from agent_cache.errors import ConfigurationError

__all__ = ["PrefixCacheResult", "PrefixCacheSimulator", "simulate_prefix_cache"]

DEFAULT_BLOCK_SIZE = 16


@dataclass(frozen=True)
class PrefixCacheResult:
    """What a simulated stream got from the prefix cache.

    Example:
        >>> r = simulate_prefix_cache([list(range(40))] * 2)
        >>> r.cached_tokens, r.hits, r.queries, r.hit_rate
        ([0, 32], 32, 80, 0.4)

    Attributes:
        cached_tokens: Per request, the prompt tokens served from cache (vLLM's
            ``usage.prompt_tokens_details.cached_tokens``); a multiple of the block size.
        prompt_tokens: Per request, the prompt length.
        evicted_blocks: Cached blocks thrown out to make room.
    """

    cached_tokens: list[int]
    prompt_tokens: list[int]
    evicted_blocks: int = 0

    @property
    def hits(self) -> int:
        """Cached tokens over the stream (``vllm:prefix_cache_hits_total``)."""
        return sum(self.cached_tokens)

    @property
    def queries(self) -> int:
        """Prompt tokens over the stream (``vllm:prefix_cache_queries_total``)."""
        return sum(self.prompt_tokens)

    @property
    def hit_rate(self) -> float:
        """``hits / queries``; 0.0 for an empty stream."""
        return self.hits / self.queries if self.queries else 0.0


@dataclass
class _Block:
    hash: int | None = None
    ref: int = 0


@dataclass
class _State:
    blocks: list[_Block] = field(default_factory=list)
    # block id -> None; the first key is the head (next victim)
    free: OrderedDict[int, None] = field(default_factory=OrderedDict)
    table: dict[int, list[int]] = field(default_factory=dict)


class PrefixCacheSimulator:
    """A stateful prefix cache: feed it requests one at a time with :meth:`run`.

    Args:
        block_size: Tokens per KV block (vLLM's ``--block-size``, default 16).
        capacity_blocks: vLLM's ``num_gpu_blocks`` (one is the null block, so
            ``capacity_blocks - 1`` are usable); ``None`` for a cache that never evicts.

    Example:
        >>> sim = PrefixCacheSimulator()
        >>> prompt = list(range(32))
        >>> sim.run(prompt), sim.run(prompt)  # the last token is always recomputed
        (0, 16)
    """

    def __init__(
        self, block_size: int = DEFAULT_BLOCK_SIZE, capacity_blocks: int | None = None
    ) -> None:
        if block_size < 1:
            raise ConfigurationError("block_size must be >= 1")
        if capacity_blocks is not None and capacity_blocks < 2:
            raise ConfigurationError("capacity_blocks must be >= 2 (one is the null block)")
        self.block_size = block_size
        self.capacity_blocks = capacity_blocks
        self._state = _State()
        if capacity_blocks is not None:
            usable = capacity_blocks - 1
            self._state.blocks = [_Block() for _ in range(usable)]
            self._state.free = OrderedDict.fromkeys(range(usable))
        self._ids: dict[tuple[int, tuple[int, ...], Hashable], int] = {}
        self.hits = 0
        self.queries = 0
        self.evicted_blocks = 0
        #: Set to a list to record what vLLM's KV events would announce, in order:
        #: ``("stored", hash, parent hash or None, block token ids)`` and
        #: ``("removed", hash)``.
        self.events: list[tuple[object, ...]] | None = None

    @property
    def hit_rate(self) -> float:
        """Cached tokens / prompt tokens over everything run so far."""
        return self.hits / self.queries if self.queries else 0.0

    @property
    def used_blocks(self) -> int:
        """Blocks holding a cached hash or owned by a request (vLLM's KV usage)."""
        if self.capacity_blocks is None:
            return sum(1 for blk in self._state.blocks if blk.hash is not None)
        free_empty = sum(1 for b in self._state.free if self._state.blocks[b].hash is None)
        return len(self._state.blocks) - free_empty

    def cached_hashes(self) -> set[int]:
        """The block hashes cached now (what vLLM's KV events would have announced)."""
        return {h for h, ids in self._state.table.items() if ids}

    def _chain(
        self, tokens: Sequence[int], salt: str | None, lora: str | None, upto: int
    ) -> list[int]:
        """Parent-chained block hashes of the first ``upto`` full blocks.

        Hashes are interned ids of ``(parent, block tokens, extra keys)``: exact, with no
        collisions, and equal exactly when vLLM's SHA-256 hashes would be equal.
        """
        b = self.block_size
        parent = -1  # NONE_HASH
        out: list[int] = []
        for i in range(upto):
            extra: tuple[str, ...] = ((lora,) if lora else ()) + (
                (salt,) if (i == 0 and salt) else ()
            )
            node = (parent, tuple(tokens[i * b : (i + 1) * b]), extra or None)
            parent = self._ids.setdefault(node, len(self._ids))
            out.append(parent)
        return out

    def lookup(
        self, tokens: Sequence[int], *, salt: str | None = None, lora: str | None = None
    ) -> int:
        """Tokens that would be served from cache now, without changing any state.

        Example:
            >>> PrefixCacheSimulator().lookup(list(range(40)))
            0
        """
        n, b = len(tokens), self.block_size
        hashes = self._chain(tokens, salt, lora, max(0, (n - 1) // b))
        hit = 0
        for h in hashes:
            if not self._state.table.get(h):
                break
            hit += 1
        return hit * b

    def run(
        self,
        tokens: Sequence[int],
        *,
        salt: str | None = None,
        lora: str | None = None,
        output_tokens: int = 0,
        output_token_ids: Sequence[int] | None = None,
    ) -> int:
        """Serve one request start to finish; return its cached prompt tokens.

        Args:
            tokens: The full rendered prompt's token ids.
            salt: The request's ``cache_salt``.
            lora: The LoRA adapter name, if any.
            output_tokens: Number of generated tokens when their ids are unknown. They take
                KV slots while the request runs (so they can evict cached blocks) but
                cannot be cached, having no known content.
            output_token_ids: The generated tokens' ids (overrides ``output_tokens``).
                As in vLLM, every full block of prompt + output whose KV was computed
                (all tokens but the last sampled one) is cached, so a next turn that
                repeats the answer reuses those blocks.

        Returns:
            The prompt tokens served from cache (a multiple of ``block_size``).

        Raises:
            ConfigurationError: The request needs more blocks than the whole pool.

        Example:
            >>> sim = PrefixCacheSimulator(capacity_blocks=5)  # 4 usable blocks
            >>> sim.run(list(range(48))), sim.run(list(range(48)))
            (0, 32)
        """
        b = self.block_size
        n = len(tokens)
        out = list(output_token_ids) if output_token_ids is not None else None
        if out is not None:
            output_tokens = len(out)
        seq: Sequence[int] = tokens if not out else [*tokens, *out]
        full = (n + len(out) - 1) // b if out else n // b
        hashes = self._chain(seq, salt, lora, full)
        hit = self._acquire(hashes, max(0, (n - 1) // b))
        cached = len(hit) * b
        self.queries += n
        self.hits += cached
        for blk in hit:  # touch: a used block leaves the free queue
            if self._state.blocks[blk].ref == 0:
                self._state.free.pop(blk, None)
            self._state.blocks[blk].ref += 1
        need = math.ceil((n + output_tokens) / b) - len(hit)
        owned = hit + self._allocate(need)
        self._cache_computed(seq, hashes, owned, len(hit), full)
        self._release(owned)
        return cached

    def _acquire(self, hashes: Sequence[int], max_blocks: int) -> list[int]:
        """The cached blocks of the prompt's longest cached prefix (of ``max_blocks``)."""
        hit: list[int] = []
        for i in range(max_blocks):
            ids = self._state.table.get(hashes[i])
            if not ids:
                break
            hit.append(ids[0])
        return hit

    def _cache_computed(
        self, seq: Sequence[int], hashes: Sequence[int], owned: list[int], start: int, full: int
    ) -> None:
        """Blocks ``start`` to ``full`` (newly full, computed) become cached."""
        st, b = self._state, self.block_size
        for j in range(start, full):
            h = hashes[j]
            st.blocks[owned[j]].hash = h
            st.table.setdefault(h, []).append(owned[j])
            if self.events is not None:
                parent = hashes[j - 1] if j else None
                self.events.append(("stored", h, parent, tuple(seq[j * b : (j + 1) * b])))

    def _release(self, owned: list[int]) -> None:
        """A finished request frees its blocks in reverse, the tail of the chain first out."""
        st = self._state
        for blk in reversed(owned):
            block = st.blocks[blk]
            block.ref -= 1
            if block.ref == 0:
                st.free[blk] = None
                if block.hash is None:
                    st.free.move_to_end(blk, last=False)

    def _allocate(self, need: int) -> list[int]:
        st = self._state
        if self.capacity_blocks is None:
            start = len(st.blocks)
            st.blocks.extend(_Block() for _ in range(need))
            for blk in range(start, start + need):
                st.blocks[blk].ref = 1
            return list(range(start, start + need))
        if need > len(st.free):
            raise ConfigurationError(
                f"a request needs {need} free KV blocks but only {len(st.free)} of "
                f"{self.capacity_blocks - 1} usable blocks are free; raise capacity_blocks"
            )
        new: list[int] = []
        for _ in range(need):
            blk, _none = st.free.popitem(last=False)
            block = st.blocks[blk]
            if block.hash is not None:  # evict its cache entry
                ids = st.table[block.hash]
                ids.remove(blk)
                if not ids:
                    del st.table[block.hash]
                if self.events is not None:
                    self.events.append(("removed", block.hash))
                block.hash = None
                self.evicted_blocks += 1
            block.ref = 1
            new.append(blk)
        return new


def simulate_prefix_cache(
    token_lists: Sequence[Sequence[int]],
    block_size: int = DEFAULT_BLOCK_SIZE,
    capacity_blocks: int | None = None,
    salts: Sequence[str | None] | None = None,
    outputs: Sequence[Sequence[int]] | None = None,
) -> PrefixCacheResult:
    """Run a request stream through a fresh :class:`PrefixCacheSimulator`.

    Args:
        token_lists: Full rendered prompts as token ids, in arrival order.
        block_size: vLLM's ``--block-size``.
        capacity_blocks: vLLM's ``num_gpu_blocks`` (``None``: never evicts).
        salts: One ``cache_salt`` (or ``None``) per request.
        outputs: The generated token ids per request; their full blocks are cached as
            vLLM does, which a multi-turn chat's next turn reuses.

    Returns:
        Cached tokens per request and the stream's hit rate.

    Example:
        >>> prompt = list(range(100))
        >>> simulate_prefix_cache([prompt, prompt]).cached_tokens
        [0, 96]
        >>> simulate_prefix_cache([prompt, prompt], salts=["a", "b"]).cached_tokens
        [0, 0]
        >>> answer = list(range(500, 530))  # turn 2 repeats turn 1's prompt and answer
        >>> simulate_prefix_cache([prompt, prompt + answer + [7] * 10],
        ...                       outputs=[answer, []]).cached_tokens
        [0, 128]
    """
    if salts is not None and len(salts) != len(token_lists):
        raise ConfigurationError("salts must have one entry per request")
    if outputs is not None and len(outputs) != len(token_lists):
        raise ConfigurationError("outputs must have one entry per request")
    sim = PrefixCacheSimulator(block_size, capacity_blocks)
    cached = [
        sim.run(
            tokens,
            salt=salts[i] if salts is not None else None,
            output_token_ids=outputs[i] if outputs is not None else None,
        )
        for i, tokens in enumerate(token_lists)
    ]
    return PrefixCacheResult(
        cached_tokens=cached,
        prompt_tokens=[len(t) for t in token_lists],
        evicted_blocks=sim.evicted_blocks,
    )
