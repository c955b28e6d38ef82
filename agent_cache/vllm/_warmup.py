"""Which prefixes to warm where, and again after a replica comes back (no I/O)."""

from __future__ import annotations

from agent_cache.keys import canonical_json
from agent_cache.vllm._calls import CallBuilder, Prefix
from agent_cache.vllm._dispatch import Call, Dispatcher
from agent_cache.vllm._endpoint import Endpoint
from agent_cache.vllm.affinity import key_covers_depth, rendezvous_order

__all__ = ["WarmupBook"]

Item = tuple[Prefix, str | None, str | None]  # prefix, model, namespace


class WarmupBook:
    """Remembers warmed prefixes and plans warm-up requests."""

    def __init__(self, dispatcher: Dispatcher, calls: CallBuilder, policy: str) -> None:
        self._d = dispatcher
        self._calls = calls
        self._policy = policy
        self._items: dict[tuple[str, str, str], Item] = {}

    def remember(self, prefix: Prefix, model: str | None, namespace: str | None) -> Item:
        ident = prefix if isinstance(prefix, str) else canonical_json([dict(m) for m in prefix])
        item = (prefix, model, namespace)
        self._items[(ident, model or "", namespace or "")] = item
        return item

    def targets(self, prefix: Prefix, namespace: str | None) -> list[Endpoint]:
        """Every available replica for a prefix too short to decide where requests go (or
        under round-robin and least-loaded); else the one the policy ranks first."""
        with self._d.lock:
            up = [e for e in self._d.endpoints if e.breaker.available()]
        covers = key_covers_depth(prefix, depth=self._calls.depth, skip=self._calls.skip)
        if self._policy in ("round_robin", "least_loaded") or not covers or not up:
            return up
        if self._policy == "prefix":
            call = self._calls.route(Call("POST", ""), prefix, namespace)
            assert call.blocks is not None
            with self._d.lock:
                ranked = self._d.chooser.rank(
                    [self._d.endpoints.index(e) for e in up],
                    call.blocks,
                    block_tokens=call.block_tokens,
                    prompt_tokens=call.prompt_tokens,
                    session=None,
                )
            return [self._d.endpoints[ranked[0]]]
        key = self._calls.key_for(prefix if isinstance(prefix, str) else list(prefix), namespace)
        for i in rendezvous_order(key, self._d.urls):
            if self._d.endpoints[i] in up:
                return [self._d.endpoints[i]]
        return []

    def plan(self, items: list[Item]) -> list[tuple[Endpoint, Item]]:
        """(endpoint, item) pairs to send for ``items``."""
        return [(ep, item) for item in items for ep in self.targets(item[0], item[2])]

    def recovered(self) -> list[tuple[Endpoint, Item]]:
        """Warm-ups owed to endpoints that came back since the last call."""
        with self._d.lock:
            back = [e for e in self._d.endpoints if e.needs_warmup]
            for e in back:
                e.needs_warmup = False
        return [
            (ep, item)
            for ep in back
            for item in list(self._items.values())
            if ep in self.targets(item[0], item[2])
        ]
