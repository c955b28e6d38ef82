"""``agent-cache warmup`` on a real Redis stays inside one tenant (issue 19, point 2)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.cli import main
from agent_cache.ops import export_entries
from agent_cache.testing import HashEmbedder

Q_B = "What is the refund policy of tenant b?"


def test_warmup_on_redis_never_reaches_another_tenant(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"warm-{uuid.uuid4().hex[:8]}"
    opts = {"redis_url": redis_url, "prefix": prefix, "path": tmp_path / "local"}
    with LayeredCache(embedder=HashEmbedder(256), **opts) as cache:  # type: ignore[arg-type]
        cache.store(Q_B, "b's answer", namespace="tenant-b", tags=["b-doc"])
        export_entries(cache, tmp_path / "b.jsonl")
    (row,) = [json.loads(x) for x in (tmp_path / "b.jsonl").read_text().splitlines()]
    forged = [
        dict(row, namespace="tenant-a", response="attacker's answer", tags=["a-doc"]),
        dict(row, namespace="tenant-a", key="ac1:" + "2" * 64, version=10**9, prompt="q2"),
    ]
    file = tmp_path / "in.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in forged), encoding="utf-8")
    cli = ["warmup", str(file), "--redis-url", redis_url, "--prefix", prefix,
           "--path", str(tmp_path / "local"), "--embedder", "hash", "--no-progress"]  # fmt: skip
    for extra in ([], ["--trust-file"]):
        started = time.monotonic()
        assert main([*cli, "--namespace", "tenant-a", *extra]) == 0
        assert time.monotonic() - started < 10
        assert "stored 0 entries" in capsys.readouterr().out
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"prompt": Q_B, "response": "x", "namespace": "tenant-b"}))
    assert main(["warmup", str(plain), *cli[2:], "--namespace", "tenant-a"]) == 2
    assert "line 1: namespace: 'tenant-b'" in capsys.readouterr().err
    with LayeredCache(embedder=HashEmbedder(256), **opts) as cache:  # type: ignore[arg-type]
        assert cache.kv_store.get_counter("version:tenant-b") == 0
        assert cache.kv_store.get_counter("version:tenant-a") == 0
        cache.invalidate(["a-doc"], namespace="tenant-a")
        hit = cache.lookup(Q_B, namespace="tenant-b")
        assert hit is not None and hit.response == "b's answer"
        assert cache.lookup(Q_B, namespace="tenant-a") is None
        assert cache.entry_counts()["exact"] == 1
