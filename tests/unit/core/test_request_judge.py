"""The application's model as a request judge (issue 18, point 2): asked only where the
semantic layer is unsure, once per pair, within its share, never overriding a refusal the
analysis understands; a failure or a timeout is a miss."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from agent_cache import LayeredCache
from agent_cache.errors import ConfigurationError
from agent_cache.judge import Judge


class TableEmbedder:
    """Vectors chosen per text, so the cosines of the tests are what they say."""

    name = "table"

    def __init__(self, cosines: dict[str, float]) -> None:
        self.cosines = cosines  # text -> cosine with the stored question

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = []
        for t in texts:
            c = self.cosines.get(t, 1.0)
            rows.append([c, float(np.sqrt(max(0.0, 1 - c * c))), 0.0])
        return np.asarray(rows, dtype=np.float32)


STORED = "How do I cancel my subscription?"
NEAR = "How do I terminate my subscription?"  # a substitution the analysis cannot explain
BAND = "How do I stop paying for my subscription plan?"  # below the threshold, in the band
NUMBERS = "How do I cancel my 2 subscriptions?"  # refused for numbers: never judged


def _cache(model: object, **kw: object) -> LayeredCache:
    emb = TableEmbedder({STORED: 1.0, NEAR: 0.95, BAND: 0.88, NUMBERS: 0.97})
    cache = LayeredCache(path=None, embedder=emb, threshold=0.92, request_judge=model, **kw)
    cache.store(STORED, "Settings > Billing > Cancel", llm_string="m")
    return cache


def test_off_by_default_nothing_close_is_served() -> None:
    cache = _cache(None)
    assert cache.request_judge is None
    assert cache.lookup(NEAR, llm_string="m") is None
    assert cache.lookup(BAND, llm_string="m") is None


def test_a_yes_serves_once_per_pair() -> None:
    asked: list[str] = []

    def model(prompt: str) -> str:
        asked.append(prompt)
        return "Yes."

    cache = _cache(Judge(model, max_share=1.0))
    for _ in range(3):
        hit = cache.lookup(NEAR, llm_string="m")
        assert hit is not None and hit.response == "Settings > Billing > Cancel"
    assert len(asked) == 1 and NEAR in asked[0] and STORED in asked[0]
    hit = cache.lookup(BAND, llm_string="m")
    assert hit is not None
    stats = cache.request_judge.stats()  # type: ignore[union-attr]
    assert stats["asked"] == 2 and stats["yes"] == 2 and stats["cached"] == 2


def test_a_no_or_anything_else_is_a_miss() -> None:
    for reply in ("No", "maybe", "", "I think yes"):
        cache = _cache(Judge(lambda prompt, r=reply: r, max_share=1.0))
        assert cache.lookup(NEAR, llm_string="m") is None, reply


def test_refusals_the_analysis_understands_never_reach_the_judge() -> None:
    asked: list[str] = []
    cache = _cache(Judge(lambda p: asked.append(p) or "yes", max_share=1.0))
    assert cache.lookup(NUMBERS, llm_string="m") is None
    assert asked == []


def test_a_failing_or_slow_model_is_a_miss() -> None:
    def broken(prompt: str) -> str:
        raise RuntimeError("model down")

    def slow(prompt: str) -> str:
        time.sleep(2)
        return "yes"

    cache = _cache(Judge(broken, max_share=1.0))
    assert cache.lookup(NEAR, llm_string="m") is None
    assert cache.request_judge.stats()["failed"] == 1  # type: ignore[union-attr]
    started = time.perf_counter()
    cache = _cache(Judge(slow, max_share=1.0, timeout=0.2))
    assert cache.lookup(NEAR, llm_string="m") is None
    assert time.perf_counter() - started < 1.5
    cache.close()


def test_the_share_of_lookups_judged_is_capped() -> None:
    asked: list[str] = []
    judge = Judge(lambda p: asked.append(p) or "no", max_share=0.2, cache_size=0)
    cache = _cache(judge)
    for _ in range(50):
        cache.lookup(NEAR, llm_string="m")
    assert len(asked) <= 0.2 * 50 + 1
    assert judge.stats()["capped"] > 0


def test_framework_models_are_asked_through_their_own_api() -> None:
    class LangChainLike:
        def invoke(self, prompt: str) -> object:
            return type("Msg", (), {"content": "yes"})()

    class LlamaIndexLike:
        def complete(self, prompt: str) -> object:
            return type("Resp", (), {"text": "no"})()

    assert Judge(LangChainLike()).ask("a b c", "a b d") is True
    assert Judge(LlamaIndexLike()).ask("a b c", "a b d") is False
    with pytest.raises(ConfigurationError):
        Judge(42)


async def test_async_lookups_use_the_judge_too() -> None:
    cache = _cache(Judge(lambda p: "yes", max_share=1.0))
    hit = await cache.alookup(NEAR, llm_string="m")
    assert hit is not None


def test_explain_says_when_an_earlier_layer_answers() -> None:
    from agent_cache.testing import HashEmbedder

    cache = LayeredCache(path=None, embedder=HashEmbedder())
    assert cache.explain("How do I reset my password?", "how do I reset  my password?").layer == (
        "exact"
    )
    assert cache.explain("How do I reset my password?", "How can I reset it?").layer is None
    cache.store("How do I reset my password?", "Settings", llm_string="m")
    why = cache.explain("HOW do I reset my password?", llm_string="m")
    assert why.layer == "exact" and "exact layer answers first" in str(why)
    assert cache.explain("Where is my invoice?", llm_string="m").layer is None
