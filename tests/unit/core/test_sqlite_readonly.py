"""A cache on a file, folder or mount this process cannot write serves its reads.

Tests run as root, who ignores permission bits: the reading part runs in a child that
drops to ``nobody`` (uid 65534) after the files were made world-readable and read-only,
so SQLite meets exactly what a user on a read-only copy meets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

ROOT = Path(__file__).resolve().parents[3]

_CHILD = textwrap.dedent(
    """
    import json, logging, os, sys, tempfile
    from agent_cache import LayeredCache
    from agent_cache.testing import HashEmbedder

    # warm up on a writable cache first: every lazy import happens while still root
    with LayeredCache(path=tempfile.mkdtemp(), embedder=HashEmbedder()) as warm:
        warm.store("warm", "up")
        warm.lookup("warm")
    if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logging.getLogger("agent_cache").addHandler(Keep())
    with LayeredCache(path=sys.argv[1], embedder=HashEmbedder()) as cache:
        answers = [cache.lookup(f"question number {i}") for i in range(50)]
        cache.store("a new question", "never stored")
        stored = cache.lookup("a new question") is not None
    print(json.dumps({
        "hits": sum(a is not None for a in answers),
        "right": sum(a is not None and a.response == f"answer {i}"
                     for i, a in enumerate(answers)),
        "stored": stored,
        "logs": records,
    }))
    """
)


def _fill(path: Path) -> None:
    with LayeredCache(path=path, embedder=HashEmbedder()) as cache:
        for i in range(50):
            cache.store(f"question number {i}", f"answer {i}")


def _read_only(path: Path) -> None:
    for name in os.listdir(path):
        os.chmod(path / name, 0o444)
    os.chmod(path, 0o555)
    os.chmod(path.parent, 0o755)


def _run_child(path: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'integrations'}")
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_a_read_only_cache_serves_every_stored_entry() -> None:
    # not under tmp_path: pytest's folders are root-only, the child could not reach it
    top = Path(tempfile.mkdtemp(prefix="agent-cache-ro-"))
    cache_dir = top / "cache"
    _fill(cache_dir)
    _read_only(cache_dir)
    try:
        result = _run_child(cache_dir)
    finally:
        os.chmod(cache_dir, 0o755)
        shutil.rmtree(top, ignore_errors=True)
    assert result["hits"] == 50
    assert result["right"] == 50
    assert result["stored"] is False  # a write is a logged miss, never an exception
    logs = result["logs"]
    assert isinstance(logs, list)
    assert any("not writable: serving reads only" in str(m) for m in logs)
