"""``agent-cache stats / export / warmup / clear`` against a real Redis and Chroma server
(started by conftest.py), with the real default embedder."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from agent_cache import LayeredCache
from agent_cache.cli import main
from agent_cache.testing import HashEmbedder
from agent_cache.vectors import ChromaVectorStore

pytestmark = pytest.mark.integration

FAQ = [
    ("How do I reset my password?", "Use the 'Forgot password' link."),
    ("What is the capital of France?", "Paris."),
    ("How do I cancel my order?", "Open the order and press Cancel."),
    ("Which payment methods do you accept?", "Cards and bank transfer."),
    ("How long does shipping take?", "Three to five working days."),
    ("Can I change my delivery address?", "Yes, until the parcel ships."),
]
PARAPHRASE = ("How can I reset my password?", "Use the 'Forgot password' link.")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def run_prefix() -> str:
    return f"ops.{uuid.uuid4().hex[:10]}"


@pytest.fixture
def servers(redis_url: str, chroma_url: str, run_prefix: str) -> Iterator[list[str]]:
    """The CLI options of a Redis + Chroma server deployment; cleared afterwards."""
    yield ["--redis-url", redis_url, "--chroma-url", chroma_url, "--prefix", run_prefix]
    for prefix in (run_prefix, f"{run_prefix}.other"):
        with LayeredCache(
            path=None, redis_url=redis_url, chroma_url=chroma_url, prefix=prefix
        ) as c:
            c.clear()


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_chroma_metadata_and_namespace_counts(tmp_path: Path, chroma_url: str, where: str) -> None:
    name = f"ops-{uuid.uuid4().hex[:10]}"
    store = (
        ChromaVectorStore(path=str(tmp_path / "chroma"), collection=name)
        if where == "embedded"
        else ChromaVectorStore(url=chroma_url, collection=name)
    )
    with store:
        n = 1205  # more than one page of Chroma reads
        ids = [f"k{i}" for i in range(n)]
        vecs = np.random.default_rng(0).standard_normal((n, 8)).astype(np.float32)
        metas: list[dict[str, Any]] = [
            {"scope": f"s{i % 2}", "namespace": "a" if i % 5 else "b", "expires_at": 1e18}
            for i in range(n)
        ]
        store.add(ids, vecs, metas)
        assert store.namespace_counts() == {"a": 964, "b": 241}
        got = store.metadata(["k0", "k7", "nope"])
        assert set(got) == {"k0", "k7"}
        assert got["k0"]["scope"] == "s0" and got["k7"]["namespace"] == "a"
        assert got["k0"]["expires_at"] == float("inf")
        store.clear("b")
        assert store.namespace_counts() == {"a": 964}
        store.clear()


def test_export_from_sqlite_warmup_into_redis_and_chroma_hits(
    tmp_path: Path, minilm: Any, servers: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    src, out, again = tmp_path / "src", tmp_path / "export.jsonl", tmp_path / "again.jsonl"
    with LayeredCache(path=src, embedder=minilm) as cache:
        for i, (q, a) in enumerate(FAQ):
            ns = "support" if i % 2 else "sales"
            cache.store(q, a, llm_string="gpt-x", namespace=ns, tags=[f"faq:{i}"])
        cache.store("search('weather', city='Oslo')", {"temp": 3}, namespace="tools")
    assert main(["export", str(out), "--path", str(src), "--no-progress"]) == 0
    assert "exported 7 entries" in capsys.readouterr().out
    assert main(["warmup", str(out), *servers, "--trust-file", "--no-progress"]) == 0  # real
    assert "stored 7 entries" in capsys.readouterr().out
    assert main(["stats", *servers, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["namespaces"] == {
        "sales": {"exact": 3, "semantic": 3},
        "support": {"exact": 3, "semantic": 3},
        "tools": {"exact": 1, "semantic": 0},
    }
    # the same entries: an export of the target equals the export of the source
    assert main(["export", str(again), *servers, "--no-progress"]) == 0
    capsys.readouterr()
    key = lambda r: r["key"]  # noqa: E731
    mine, theirs = sorted(_lines(again), key=key), sorted(_lines(out), key=key)
    for a, b in zip(mine, theirs, strict=True):  # Chroma keeps ~16 digits of a float
        assert a.pop("vector_expires_at") == pytest.approx(b.pop("vector_expires_at"), abs=1e-3)
    assert mine == theirs
    redis_url, chroma_url, prefix = servers[1], servers[3], servers[5]
    with LayeredCache(
        path=None, redis_url=redis_url, chroma_url=chroma_url, prefix=prefix, embedder=minilm
    ) as cache:
        for i, (q, a) in enumerate(FAQ):
            hit = cache.lookup(q, llm_string="gpt-x", namespace="support" if i % 2 else "sales")
            assert hit is not None and hit.layer == "exact" and hit.response == a
        hit = cache.lookup(PARAPHRASE[0], llm_string="gpt-x", namespace="sales")
        assert hit is not None and hit.layer == "semantic" and hit.response == PARAPHRASE[1]
        assert cache.lookup(PARAPHRASE[0], llm_string="gpt-x", namespace="support") is None
        assert cache.invalidate(tags=["faq:0"], namespace="sales") == 1


def test_export_resume_on_redis_rewrites_a_torn_line(
    tmp_path: Path, servers: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    redis_url, chroma_url, prefix = servers[1], servers[3], servers[5]
    with LayeredCache(
        path=None,
        redis_url=redis_url,
        chroma_url=chroma_url,
        prefix=prefix,
        embedder=HashEmbedder(256),
    ) as cache:
        cache.store_many([(f"question {i}", f"answer {i}") for i in range(1200)])
    out = tmp_path / "out.jsonl"
    assert main(["export", str(out), *servers, "--no-progress"]) == 0
    lines = out.read_bytes().splitlines(keepends=True)
    assert len(lines) == 1200
    out.write_bytes(b"".join(lines[:600]) + lines[600][:40])
    assert main(["export", str(out), *servers, "--resume", "--no-progress"]) == 0
    assert "a torn last line was rewritten" in capsys.readouterr().out
    rows = _lines(out)
    assert len(rows) == 1200 and len({r["key"] for r in rows}) == 1200
    assert {r["prompt"] for r in rows} == {f"question {i}" for i in range(1200)}


def test_clear_touches_only_its_namespace_and_prefix(
    redis_url: str, chroma_url: str, servers: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = servers[5]
    made = []
    for p in (prefix, f"{prefix}.other"):  # another app: its prefix starts with ours
        cache = LayeredCache(
            path=None,
            redis_url=redis_url,
            chroma_url=chroma_url,
            prefix=p,
            embedder=HashEmbedder(256),
        )
        for ns in ("a", "b"):
            cache.store_many([(f"{ns} question {i}", i) for i in range(5)], namespace=ns)
        made.append(cache)
    raw = redis.Redis.from_url(redis_url, decode_responses=True)
    raw.set(f"{prefix}:e:not-ours", "someone else's")  # a foreign key under our prefix's name
    try:
        monkeypatch.setattr("sys.stdin", io.StringIO("b\n"))
        assert main(["clear", *servers, "--namespace", "a"]) == 2  # the wrong word: nothing
        assert made[0].entry_counts() == {"exact": 10, "semantic": 10}
        assert main(["clear", *servers, "--namespace", "a", "--yes"]) == 0
        assert made[0].entry_counts() == {"exact": 5, "semantic": 5}
        assert made[0].lookup("b question 1", namespace="b") is not None
        assert made[1].entry_counts() == {"exact": 10, "semantic": 10}
        monkeypatch.setattr("sys.stdin", io.StringIO(f"{prefix}\n"))
        assert main(["clear", *servers]) == 0  # every namespace of this prefix
        assert made[0].entry_counts() == {"exact": 0, "semantic": 0}
        assert made[1].entry_counts() == {"exact": 10, "semantic": 10}
        assert made[1].lookup("a question 2", namespace="a") is not None
        assert raw.get(f"{prefix}:e:not-ours") == "someone else's"
    finally:
        raw.delete(f"{prefix}:e:not-ours")
        raw.close()
        for cache in made:
            cache.close()
