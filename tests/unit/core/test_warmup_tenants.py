"""``agent-cache warmup`` stays inside one tenant (issue 19, point 2).

A warmup file is outside input: keys, namespaces and versions in it are never taken
(unless ``--trust-file``), every field is checked with its line number, and nothing the
cache would never store is restored. Each test is a reproduction from the issue.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from agent_cache import LayeredCache
from agent_cache.cli import main
from agent_cache.ops import export_entries
from agent_cache.testing import HashEmbedder

Q_B = "What is the refund policy of tenant b?"
Q_A = "What is the shipping policy of tenant a?"


def _cache(path: Path, **kw: Any) -> LayeredCache:
    return LayeredCache(path=path, embedder=HashEmbedder(256), **kw)


def _export(path: Path, out: Path) -> list[dict[str, Any]]:
    with _cache(path) as cache:
        export_entries(cache, out, overwrite=True)
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _warmup(path: Path, file: Path, *extra: str) -> int:
    args = ["warmup", str(file), "--path", str(path), "--embedder", "hash", "--no-progress"]
    return main([*args, *extra])


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    """One deployment, tenant-b holding one entry (tag ``b-doc``)."""
    path = tmp_path / "cache"
    with _cache(path) as cache:
        cache.store(Q_B, "b's answer", namespace="tenant-b", tags=["b-doc"])
    return path


def test_an_export_line_of_another_tenant_is_refused(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (row,) = _export(deployment, tmp_path / "b.jsonl")
    poisoned = dict(row, prompt="What is the refund policy of tenant b? (poisoned)",
                    response="attacker's answer")  # fmt: skip
    file = _write(tmp_path / "in.jsonl", [poisoned])
    assert _warmup(deployment, file, "--namespace", "tenant-a") == 2
    err = capsys.readouterr().err
    assert "line 1: namespace: 'tenant-b' is not --namespace 'tenant-a'" in err
    with _cache(deployment) as cache:
        hit = cache.lookup(Q_B, namespace="tenant-b")
        assert hit is not None and hit.response == "b's answer"
        assert cache.entry_counts() == {"exact": 1, "semantic": 1}


def test_a_key_of_another_tenant_is_never_written(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line that says tenant-a but carries tenant-b's key: the key is recomputed."""
    (row,) = _export(deployment, tmp_path / "b.jsonl")
    forged = dict(row, namespace="tenant-a", response="attacker's answer", tags=["a-doc"])
    file = _write(tmp_path / "in.jsonl", [forged])
    assert _warmup(deployment, file, "--namespace", "tenant-a") == 0
    out = capsys.readouterr().out
    assert "1 export lines were made under another model" in out and "stored 0" in out
    with _cache(deployment) as cache:
        hit = cache.lookup(Q_B, namespace="tenant-b")
        assert hit is not None and hit.response == "b's answer"  # not overwritten
        cache.invalidate(["a-doc"], namespace="tenant-a")  # tenant-a's own tag
        assert cache.lookup(Q_B, namespace="tenant-b") is not None
        assert cache.entry_counts()["exact"] == 1


def test_a_tenant_export_restores_into_its_namespace_under_new_keys(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _cache(tmp_path / "src") as src:
        src.store(Q_A, "a's answer", namespace="tenant-a", tags=["a-doc"])
        export_entries(src, tmp_path / "a.jsonl")
    assert _warmup(deployment, tmp_path / "a.jsonl", "--namespace", "tenant-a") == 0
    assert "stored 1 entries" in capsys.readouterr().out
    with _cache(deployment) as cache:
        hit = cache.lookup(Q_A, namespace="tenant-a")
        assert hit is not None and hit.response == "a's answer"
        assert cache.invalidate(["a-doc"], namespace="tenant-a") == 1  # its tag came along
        assert cache.lookup(Q_B, namespace="tenant-b") is not None


def test_a_plain_line_cannot_pick_its_namespace(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = _write(tmp_path / "in.jsonl", [
        {"prompt": "fine question", "response": "fine"},
        {"prompt": Q_B, "response": "attacker's answer", "namespace": "tenant-b"},
    ])  # fmt: skip
    assert _warmup(deployment, file, "--namespace", "tenant-a") == 2
    assert "line 2: namespace: 'tenant-b'" in capsys.readouterr().err
    with _cache(deployment) as cache:
        assert cache.lookup(Q_B, namespace="tenant-b").response == "b's answer"  # type: ignore[union-attr]
        assert cache.lookup("fine question", namespace="tenant-a") is None  # nothing written


@pytest.mark.parametrize("trust", [False, True])
def test_a_version_in_the_file_never_raises_a_counter(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], trust: bool
) -> None:
    (row,) = _export(deployment, tmp_path / "b.jsonl")
    rows = [dict(row, key="ac1:" + "0" * 64, version=3, prompt="another question"),
            dict(row, key="ac1:" + "1" * 64, version=10**9, prompt="a third question")]  # fmt: skip
    file = _write(tmp_path / "in.jsonl", rows)
    extra = ["--trust-file"] if trust else []
    started = time.monotonic()
    assert _warmup(deployment, file, "--namespace", "tenant-b", *extra) == 0
    assert time.monotonic() - started < 10  # never one increment per version
    out = capsys.readouterr().out
    with _cache(deployment) as cache:
        assert cache.kv_store.get_counter("version:tenant-b") == 0
        hit = cache.lookup(Q_B, namespace="tenant-b")  # its entries still hit
        assert hit is not None and hit.response == "b's answer"
    if trust:
        assert "2 lines were exported under another version" in out and "stored 0" in out
    else:  # keys recomputed under the current version; these keys are not their prompts'
        assert "2 export lines were made under another model" in out


def test_a_float_version_is_refused_with_its_line(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (row,) = _export(deployment, tmp_path / "b.jsonl")
    file = tmp_path / "in.jsonl"
    line = json.dumps(row)
    file.write_text(line + "\n" + line.replace('"version": 0', '"version": 1e9') + "\n")
    assert _warmup(deployment, file, "--namespace", "tenant-b", "--trust-file") == 2
    assert "line 2: version: 1000000000.0 is not an integer >= 0" in capsys.readouterr().err


def test_trust_file_keeps_keys_and_namespaces_of_the_same_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _cache(tmp_path / "src") as src:
        src.store(Q_A, "a's answer", namespace="tenant-a", tags=["a-doc"])
        src.store(Q_B, "b's answer", namespace="tenant-b", tags=["b-doc"])
        export_entries(src, tmp_path / "all.jsonl")
    dst = tmp_path / "dst"
    assert _warmup(dst, tmp_path / "all.jsonl", "--trust-file") == 0
    assert "(namespaces 'tenant-a', 'tenant-b')" in capsys.readouterr().out
    with _cache(dst) as cache:
        assert cache.lookup(Q_A, namespace="tenant-a").response == "a's answer"  # type: ignore[union-attr]
        assert cache.lookup(Q_B, namespace="tenant-b").response == "b's answer"  # type: ignore[union-attr]
        assert cache.lookup(Q_B, namespace="tenant-a") is None
    # --namespace with --trust-file: only that namespace's lines
    assert _warmup(tmp_path / "d2", tmp_path / "all.jsonl", "--trust-file",
                   "--namespace", "tenant-a") == 2  # fmt: skip
    assert "namespace: 'tenant-b' is not --namespace 'tenant-a'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"prompt": "q", "response": "a", "expires_at": Infinity}', None),
        ('{"question": {"q": 1}, "answer": "a"}', "line 2: question: a dict, not a string"),
        ('{"prompt": 3, "response": "a"}', "line 2: prompt: a int, not a string"),
        ('{"prompt": "q", "response": "a", "tags": "doc"}', "line 2: tags: must be a list"),
    ],
)
def test_every_field_is_checked_with_its_line(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
    message: str | None,
) -> None:  # fmt: skip
    file = tmp_path / "in.jsonl"
    if message is None:  # an export line with an infinite expiry
        (row,) = _export(deployment, tmp_path / "b.jsonl")
        text = json.dumps(row)
        text = re.sub(r'"expires_at": [^,]+', '"expires_at": Infinity', text)
        message = "line 2: expires_at: Infinity is not a finite number"
    file.write_text('{"prompt": "fine", "response": "fine"}\n' + text + "\n", encoding="utf-8")
    assert _warmup(deployment, file, "--namespace", "tenant-b") == 2
    assert message in capsys.readouterr().err
    with _cache(deployment) as cache:
        assert cache.entry_counts()["exact"] == 1  # nothing written


def test_what_the_cache_never_stores_is_not_restored(
    deployment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (row,) = _export(deployment, tmp_path / "b.jsonl")
    rows = [
        {"prompt": "empty answer", "response": "  "},
        {"prompt": "error answer", "response": {"error": "rate limited"}},
        dict(row, response=""),  # an export line, trusted or not
    ]
    file = _write(tmp_path / "in.jsonl", rows)
    for extra in ([], ["--trust-file"]):
        assert _warmup(deployment, file, "--namespace", "tenant-b", *extra) == 0
        assert "3 empty or error answers not stored (lines 1, 2, 3)" in capsys.readouterr().out
    big = _write(tmp_path / "big.jsonl", [{"prompt": "x" * 1_000_001, "response": "a"}])
    assert _warmup(deployment, big, "--namespace", "tenant-b") == 2
    assert "line 1: prompt: 1000001 bytes, over max_prompt_bytes" in capsys.readouterr().err
    with _cache(deployment) as cache:
        assert cache.entry_counts()["exact"] == 1
        assert cache.lookup(Q_B, namespace="tenant-b").response == "b's answer"  # type: ignore[union-attr]
