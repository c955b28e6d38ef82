"""The last release of a shared embedder closes it and hands its pages back to the OS."""

from __future__ import annotations

import pytest

from agent_cache import embedders
from agent_cache.testing import HashEmbedder


class _Closing(HashEmbedder):
    closed = 0

    def close(self) -> None:
        type(self).closed += 1


def test_the_last_release_closes_the_model_and_trims_the_heap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(embedders, "_trim_heap", lambda: trims.append(1))
    monkeypatch.setattr(embedders, "embedder_from", lambda spec, **_: _Closing())
    a = embedders.shared_embedder("unit-test-model")
    b = embedders.shared_embedder("unit-test-model")
    assert a is b
    embedders.release_embedder(a)
    assert (_Closing.closed, trims) == (0, [])  # one reference left: nothing freed
    embedders.release_embedder(b)
    assert (_Closing.closed, trims) == (1, [1])
    assert "auto:unit-test-model" not in embedders.shared_embedders()


def test_trimming_the_heap_is_safe_to_call() -> None:
    embedders._trim_heap()  # glibc here; elsewhere a no-op, never an error
