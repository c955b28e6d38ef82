"""SQLiteStore shared by several processes on one file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_cache.stores import SQLiteStore

ROOT = Path(__file__).resolve().parents[3]

WRITER = """
import sys
from agent_cache.stores import SQLiteStore
store = SQLiteStore(sys.argv[1])
store.set("greeting", '"héllo from a child"', namespace="ns", expires_at=None,
          tags=["doc:1"], now=0.0)
store.set("short", '"soon gone"', namespace="ns", expires_at=50.0, now=0.0)
store.incr("writes")
store.close()
"""

INCREMENTER = """
import sys
from agent_cache.stores import SQLiteStore
store = SQLiteStore(sys.argv[1])
sys.stdin.readline()  # wait for the go signal, so that both processes overlap
values = [store.incr("shared") for _ in range(int(sys.argv[2]))]
store.close()
print(" ".join(map(str, values)))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def test_a_write_in_one_process_is_read_in_another(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "exact.db"
    child = _python(WRITER, str(path))
    _out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err

    with SQLiteStore(path) as store:
        assert store.get("greeting", now=0.0) == '"héllo from a child"'
        assert store.keys_for_tag("doc:1", limit=10) == ["greeting"]
        assert store.get("short", now=10.0) == '"soon gone"'
        assert store.get("short", now=50.0) is None
        assert store.get_counter("writes") == 1


def test_two_processes_increment_one_counter(tmp_path: Path) -> None:
    path = tmp_path / "exact.db"
    with SQLiteStore(path) as store:
        # the parent also holds the file open while the children write
        store.set("k", "1", namespace="ns", expires_at=None, now=0.0)
        children = [_python(INCREMENTER, str(path), "200") for _ in range(2)]
        outputs = [child.communicate(input="go\n", timeout=120) for child in children]
        for child, (_, err) in zip(children, outputs, strict=True):
            assert child.returncode == 0, err
        seen = [int(v) for out, _ in outputs for v in out.split()]
        # every increment returned a distinct value: none was lost or duplicated
        assert sorted(seen) == list(range(1, 401))
        assert store.get_counter("shared") == 400
        assert store.get("k", now=0.0) == "1"
