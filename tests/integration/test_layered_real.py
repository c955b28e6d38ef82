"""LayeredCache on real components: bundled MiniLM, Chroma (persistent and server), Redis."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration

PARAPHRASES = [
    ("How do I reset my password?", "How can I reset my password?"),
    ("What is the capital of France?", "What's the capital city of France?"),
]


def test_embedded_default_paraphrase_hit_and_near_miss(tmp_path: Path, minilm: Any) -> None:
    with LayeredCache(path=tmp_path, embedder=minilm) as cache:
        for q, _ in PARAPHRASES:
            cache.store(q, {"text": f"answer to {q}"})
        for q, para in PARAPHRASES:
            hit = cache.lookup(para)
            assert hit is not None and hit.layer == "semantic", para
            assert hit.response == {"text": f"answer to {q}"}
            assert hit.score is not None and hit.score >= cache.threshold
        cache.store("What is the status of order 12345?", "shipped")
        assert cache.lookup("What is the status of order 12346?") is None
        assert cache.lookup("How do I cook pasta?") is None
        # one SQLite database holds entries and vectors (no embedded Chroma folder)
        assert (tmp_path / "exact.sqlite3").exists() and not (tmp_path / "vectors").exists()
        assert cache.vector_store.count() == len(PARAPHRASES) + 1


def test_persistence_across_processes_on_one_path(tmp_path: Path) -> None:
    writer = textwrap.dedent(
        f"""
        from agent_cache import LayeredCache
        with LayeredCache(path={str(tmp_path)!r}) as c:
            c.store("How do I reset my password?", {{"text": "use the link"}}, tags=["faq"])
        """
    )
    subprocess.run([sys.executable, "-c", writer], check=True, timeout=300)
    with LayeredCache(path=tmp_path) as cache:
        exact = cache.lookup("how do i reset my password?")
        assert exact is not None and exact.layer == "exact"
        sem = cache.lookup("How can I reset my password?")
        assert sem is not None and sem.layer == "semantic"
        assert sem.response == {"text": "use the link"}
        assert cache.invalidate(tags=["faq"]) == 1
        assert cache.lookup("How can I reset my password?") is None


def test_redis_exact_layer_and_chroma_server(redis_url: str, chroma_url: str, minilm: Any) -> None:
    with LayeredCache(
        path=None, redis_url=redis_url, chroma_url=chroma_url, embedder=minilm
    ) as cache:
        cache.clear()
        cache.store("What is the capital of France?", "Paris", llm_string="m1", tags=["geo"])
        exact = cache.lookup("what is the capital of france?", llm_string="m1")
        assert exact is not None and exact.layer == "exact"
        sem = cache.lookup("What's the capital city of France?", llm_string="m1")
        assert sem is not None and sem.layer == "semantic" and sem.response == "Paris"
        # scoped by model identity inside the k-NN: another model never sees it
        assert cache.lookup("What's the capital city of France?", llm_string="m2") is None
        cache.bump_version()
        assert cache.lookup("What's the capital city of France?", llm_string="m1") is None


def test_async_paths_on_real_backends(tmp_path: Path, minilm: Any) -> None:
    async def main() -> list[Any]:
        async with LayeredCache(path=tmp_path, embedder=minilm) as cache:
            calls = []

            async def compute() -> dict[str, str]:
                calls.append(1)
                await asyncio.sleep(0.05)
                return {"text": "Paris"}

            results = await asyncio.gather(
                *[
                    cache.aget_or_compute("What is the capital of France?", compute)
                    for _ in range(5)
                ]
            )
            assert len(calls) == 1
            hit = await cache.alookup("What's the capital city of France?")
            return [results, hit]

    results, hit = asyncio.run(main())
    assert results == [{"text": "Paris"}] * 5
    assert hit is not None and hit.layer == "semantic"


def test_store_failure_is_a_miss_when_chroma_server_is_down(minilm: Any) -> None:
    with LayeredCache(path=None, chroma_url="http://127.0.0.1:9", embedder=minilm) as cache:
        cache.store("What is the capital of France?", "Paris")  # vector write fails: logged
        assert cache.lookup("what is the capital of france?") is not None  # exact still works
        assert cache.lookup("What's the capital city of France?") is None
        assert cache.stats().errors >= 2
    json.dumps(cache.stats().as_dict())
