"""Operations: stats / export / warmup of an export / clear (agent_cache.ops and the CLI),
and the vector stores' metadata and per-namespace counts they stand on."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agent_cache import LayeredCache
from agent_cache.cli import main
from agent_cache.errors import AgentCacheError, ConfigurationError
from agent_cache.ops import clear_entries, entry_counts, export_entries, restore_entries
from agent_cache.testing import FakeClock, HashEmbedder
from agent_cache.vectors import MemoryVectorStore, SQLiteVectorStore

QUESTIONS = [f"How do I configure feature number {i} of the product?" for i in range(40)]


# -- vector stores: metadata(ids) and namespace_counts() --------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def vectors(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    store: Any = (
        MemoryVectorStore()
        if request.param == "memory"
        else SQLiteVectorStore(tmp_path / "v.sqlite3")
    )
    yield store
    store.close()


def test_vector_metadata_and_namespace_counts(vectors: Any) -> None:
    metas = [
        {"scope": "s1", "namespace": "alpha", "key": "a", "expires_at": 10.0},
        {"scope": "s2", "namespace": "alpha", "key": "b", "expires_at": 1e18},
        {"scope": "s1", "namespace": "beta", "key": "c", "expires_at": 5.0},
    ]
    vectors.add(["a", "b", "c"], np.eye(3, dtype=np.float32), metas)
    assert vectors.namespace_counts() == {"alpha": 2, "beta": 1}
    got = vectors.metadata(["c", "a", "missing", "a"])
    assert set(got) == {"a", "c"}
    assert got["a"]["scope"] == "s1" and got["a"]["namespace"] == "alpha"
    assert got["c"]["scope"] == "s1" and got["c"]["expires_at"] == 5.0
    vectors.delete(["a"])
    assert vectors.metadata(["a"]) == {}
    assert vectors.namespace_counts() == {"alpha": 1, "beta": 1}
    vectors.clear("beta")
    assert vectors.namespace_counts() == {"alpha": 1}


# -- export / restore -------------------------------------------------------------------


def _filled(path: Path | None, clock: Any = time.time, n: int = 12) -> LayeredCache:
    cache = LayeredCache(path=path, embedder=HashEmbedder(256), clock=clock)
    for i, q in enumerate(QUESTIONS[:n]):
        ns = "default" if i % 3 else "tenant-b"
        cache.store(q, {"answer": i}, llm_string="model-x", namespace=ns, tags=[f"doc:{i}"])
    cache.store("short lived", "soon gone", ttl=5, llm_string="model-x")
    cache.store("a tool call", "tool result", namespace="tools")  # exact only: no vector
    return cache


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_export_writes_every_live_entry_once(tmp_path: Path) -> None:
    clock = FakeClock(1_000.0)
    with _filled(tmp_path / "src", clock) as cache:
        clock.advance(10)  # "short lived" expired
        report = export_entries(cache, tmp_path / "out.jsonl")
    rows = _lines(tmp_path / "out.jsonl")
    assert report.written == len(rows) == 13 and report.already == 0
    assert len({r["key"] for r in rows}) == 13
    assert "short lived" not in {r["prompt"] for r in rows}
    by_prompt = {r["prompt"]: r for r in rows}
    first = by_prompt[QUESTIONS[0]]
    assert first["namespace"] == "tenant-b" and first["response"] == {"answer": 0}
    assert first["tags"] == ["doc:0"] and first["scope"] and first["version"] == 0
    assert first["expires_at"] > clock()
    assert by_prompt["a tool call"]["scope"] is None  # an exact-only namespace
    only = export_entries(cache, tmp_path / "b.jsonl", namespace="tenant-b")
    assert only.written == 4
    assert {r["namespace"] for r in _lines(tmp_path / "b.jsonl")} == {"tenant-b"}


def test_export_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n", encoding="utf-8")
    with _filled(None, FakeClock(0.0), n=2) as cache:
        with pytest.raises(ConfigurationError, match="--resume"):
            export_entries(cache, out)
        assert out.read_text(encoding="utf-8") == "keep me\n"
        with pytest.raises(AgentCacheError, match="not a line of an agent-cache export"):
            export_entries(cache, out, resume=True)
        assert export_entries(cache, out, overwrite=True).written == 4


def test_resume_continues_after_the_last_complete_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    with _filled(tmp_path / "src", FakeClock(1_000.0), n=30) as cache:
        export_entries(cache, out)
        full = out.read_bytes()
        lines = full.splitlines(keepends=True)
        # the first run was cut inside line 8: seven lines and a torn one on disk
        out.write_bytes(b"".join(lines[:7]) + lines[7][: len(lines[7]) // 2])
        report = export_entries(cache, out, resume=True)
        assert report.torn and report.already == 7 and report.written == len(lines) - 7
        rows = _lines(out)  # every line parses: the torn one was rewritten
        assert len(rows) == len(lines) and len({r["key"] for r in rows}) == len(lines)
        assert sorted(map(json.dumps, rows)) == sorted(
            json.dumps(json.loads(x)) for x in full.splitlines()
        )
        again = export_entries(cache, out, resume=True)  # nothing new: nothing written
        assert (again.written, again.already, again.torn) == (0, len(lines), False)
        cache.store("one more question about billing", "new", llm_string="model-x")
        assert export_entries(cache, out, resume=True).written == 1
        assert len(_lines(out)) == len(lines) + 1


def test_restore_round_trip_hits_exactly_and_semantically(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    clock = FakeClock(1_000.0)
    with _filled(tmp_path / "src", clock) as src:
        src.bump_version("tenant-b")  # keys carry the version: the target must follow
        src.store(QUESTIONS[0], "after bump", llm_string="model-x", namespace="tenant-b")
        export_entries(src, out)
        before = entry_counts(src)
    rows = [(f"out:{i}", r) for i, r in enumerate(_lines(out), 1)]
    dst = LayeredCache(path=None, embedder=HashEmbedder(256), clock=clock, threshold=0.85)
    with dst:
        first = restore_entries(dst, rows, batch_size=5)  # a file never raises a counter
        assert first.behind == 5 and first.stored == len(rows) - 5
        assert dst.kv_store.get_counter("version:tenant-b") == 0
        dst.bump_version("tenant-b")  # the target at the source's version: the rest follow
        report = restore_entries(dst, rows, batch_size=5)
        assert report.stored == 5 and report.skipped == len(rows) - 5 and report.behind == 0
        assert entry_counts(dst) == before
        for i, q in enumerate(QUESTIONS[:12]):
            ns = "default" if i % 3 else "tenant-b"
            hit = dst.lookup(q, llm_string="model-x", namespace=ns)
            if ns == "tenant-b" and i:  # written before the bump: unreachable there too
                assert hit is None
                continue
            want = "after bump" if i == 0 else {"answer": i}
            assert hit is not None and hit.layer == "exact" and hit.response == want
        paraphrase = QUESTIONS[4].replace("How do I", "How can I")
        hit = dst.lookup(paraphrase, llm_string="model-x")
        assert hit is not None and hit.layer == "semantic" and hit.response == {"answer": 4}
        assert dst.lookup(paraphrase, llm_string="another-model") is None  # scope kept
        assert dst.lookup("a tool call", namespace="tools").response == "tool result"  # type: ignore[union-attr]
        dst.invalidate(tags=["doc:4"], namespace="default")  # tags came along
        assert dst.lookup(QUESTIONS[4], llm_string="model-x") is None
        again = restore_entries(dst, rows)  # resumable: nothing written twice
        assert again.stored == 1 and again.skipped == len(rows) - 1  # doc:4 came back


def test_restore_skips_entries_expired_since_the_export(tmp_path: Path) -> None:
    clock = FakeClock(1_000.0)
    with LayeredCache(path=None, embedder=HashEmbedder(256), clock=clock) as src:
        src.store("brief", "x", ttl=60)
        src.store("lasting", "y")
        export_entries(src, tmp_path / "out.jsonl")
    rows = [("l", r) for r in _lines(tmp_path / "out.jsonl")]
    clock.advance(120)
    with LayeredCache(path=None, embedder=HashEmbedder(256), clock=clock) as dst:
        report = restore_entries(dst, rows)
        assert (report.stored, report.expired) == (1, 1)
        assert dst.lookup("brief") is None and dst.lookup("lasting") is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key": 3}, "'key' must be a string"),
        ({"tags": "doc"}, "'tags' must be a list"),
        ({"expires_at": "soon"}, "expires_at must be a number"),
        ({"version": -1}, "'version' must be an integer"),
        ({"scope": 7}, "'scope' must be a string"),
    ],
)
def test_restore_refuses_a_bad_line_before_writing(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with LayeredCache(path=None, embedder=HashEmbedder(256)) as src:
        src.store("q1", "a1")
        src.store("q2", "a2")
        export_entries(src, tmp_path / "out.jsonl")
    good, bad = _lines(tmp_path / "out.jsonl")
    with LayeredCache(path=None, embedder=HashEmbedder(256)) as dst:
        with pytest.raises(ConfigurationError, match=message):
            restore_entries(dst, [("f:1", good), ("f:2", {**bad, **change})])
        assert dst.entry_counts() == {"exact": 0, "semantic": 0}


# -- the command line -------------------------------------------------------------------


def test_cli_export_warmup_stats_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src, dst, out = tmp_path / "src", tmp_path / "dst", tmp_path / "out.jsonl"
    _filled(src).close()  # on the real clock, as the command line reads it
    assert main(["export", str(out), "--path", str(src), "--no-progress"]) == 0
    assert "exported 14 entries" in capsys.readouterr().out
    assert main(["export", str(out), "--path", str(src), "--no-progress"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["export", str(out), "--path", str(src), "--resume", "--no-progress"]) == 0
    assert "exported 0 entries" in capsys.readouterr().out
    args = ["--path", str(dst), "--embedder", "hash", "--no-progress"]
    assert main(["warmup", str(out), *args]) == 2  # several namespaces: not without trust
    assert "line 5: namespace: 'tenant-b' is not --namespace 'default'" in capsys.readouterr().err
    args.append("--trust-file")  # a restore of the deployment it came from
    assert main(["warmup", str(out), *args]) == 0
    assert "stored 14 entries" in capsys.readouterr().out
    assert main(["warmup", str(out), *args]) == 0
    assert "stored 0 entries" in (text := capsys.readouterr().out) and "14 already" in text
    assert main(["stats", "--path", str(dst), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entries"] == {"exact": 14, "semantic": 13}
    assert stats["namespaces"] == {
        "default": {"exact": 9, "semantic": 9},
        "tenant-b": {"exact": 4, "semantic": 4},
        "tools": {"exact": 1, "semantic": 0},
    }
    assert main(["stats", "--path", str(dst)]) == 0
    table = capsys.readouterr().out
    assert "tenant-b" in table and "total" in table


def test_cli_clear_asks_for_the_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    path = tmp_path / "c"
    _filled(path).close()
    monkeypatch.setattr("sys.stdin", io.StringIO("default\n"))  # the wrong word
    assert main(["clear", "--path", str(path), "--namespace", "tenant-b"]) == 2
    assert "nothing was deleted" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO("tenant-b\n"))
    assert main(["clear", "--path", str(path), "--namespace", "tenant-b"]) == 0
    assert "deleted 4 entries of namespace 'tenant-b'" in capsys.readouterr().out
    with LayeredCache(path=path, embedder=HashEmbedder(256)) as cache:
        counts = entry_counts(cache)["namespaces"]
        assert "tenant-b" not in counts and counts["default"]["exact"] == 9
    assert main(["clear", "--path", str(path), "--yes"]) == 0
    with LayeredCache(path=path, embedder=HashEmbedder(256)) as cache:
        assert cache.entry_counts() == {"exact": 0, "semantic": 0}
        assert clear_entries(cache) == 0


def test_cli_stats_needs_a_file_or_a_cache(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats"]) == 2
    assert "--redis-url" in capsys.readouterr().err


def test_cli_timeout_reaches_the_backends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the operations use their own, longer, backend timeout (bulk deletes and reads)
    assert main(["stats", "--path", str(tmp_path), "--timeout", "0"]) == 2
    assert "backend_timeout must be > 0" in capsys.readouterr().err
    _filled(tmp_path / "c", n=2).close()  # a path that holds a cache (an empty dir is refused)
    assert main(["stats", "--path", str(tmp_path / "c"), "--timeout", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"]["exact"] == 4  # 2 + 2 extra
