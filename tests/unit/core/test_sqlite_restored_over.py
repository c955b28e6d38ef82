"""A backup restored over the cache file (``os.replace``) while a running process keeps
its ``-wal`` / ``-shm`` beside it (issue 19 point 1, the real files).

The next opener reads the backup's pages mixed with the other database's WAL frames:
before the record checks, 334 of 600 lookups were wrong hits ("orig question 7"
answered with another entry). Now nothing wrong is served: a mixed-up record is a
counted miss (``record_mismatch``), a malformed page a ``BackendError`` naming the file
(``on_corrupt="raise"``) or a rebuild (``"rebuild"``).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.errors import BackendError
from agent_cache.testing import HashEmbedder

N = 300


def _restore_over_a_running_cache(root: Path) -> tuple[Path, LayeredCache]:
    other, live = root / "other", root / "live"
    with LayeredCache(path=other, embedder=HashEmbedder()) as cache:
        for i in range(N):
            cache.store(f"other question {i}", f"other|{i}")
    backup = root / "backup.sqlite3"
    src, dst = sqlite3.connect(other / "exact.sqlite3"), sqlite3.connect(backup)
    src.backup(dst)
    src.close()
    dst.close()
    running = LayeredCache(path=live, embedder=HashEmbedder())
    for i in range(N):
        running.store(f"orig question {i}", f"orig|{i}")
    os.replace(backup, live / "exact.sqlite3")  # its -wal / -shm stay
    assert (live / "exact.sqlite3-wal").stat().st_size > 0
    return live, running


def test_a_backup_restored_over_the_file_never_serves_a_wrong_hit(tmp_path: Path) -> None:
    live, running = _restore_over_a_running_cache(tmp_path)
    right = wrong = 0
    with LayeredCache(path=live, embedder=HashEmbedder(), on_corrupt="rebuild") as cache:
        for i in list(range(N)) * 2:
            hit = cache.lookup(f"orig question {i}")
            if hit is not None:
                right += hit.response == f"orig|{i}"
                wrong += hit.response != f"orig|{i}"
        counters = cache.stats().counters
    running.close()
    assert wrong == 0
    assert (
        counters.get("record_mismatch", 0) + sum(v for k, v in counters.items() if "malformed" in k)
        >= 1
    ), counters  # what happened is counted, not silent


def test_with_on_corrupt_raise_the_mixed_file_is_an_error_naming_it(tmp_path: Path) -> None:
    live, running = _restore_over_a_running_cache(tmp_path)
    served: list[str] = []
    with (
        LayeredCache(path=live, embedder=HashEmbedder()) as cache,
        pytest.raises(BackendError) as info,
    ):
        for i in range(N):
            hit = cache.lookup(f"orig question {i}")
            if hit is not None and hit.response != f"orig|{i}":
                served.append(hit.response)
    running.close()
    assert served == []
    assert str(live / "exact.sqlite3") in str(info.value)
