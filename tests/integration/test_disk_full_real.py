"""A full disk, for real: the SQLite cache on a 3 MiB tmpfs, filled past the brim.

The WAL must not eat the space (before: 67 entries fit, 3 MiB of WAL beside a 4 KB
database, and the checkpoint that would free it could no longer grow the database), the
cache keeps answering (hits stay hits, 0 wrong), and the failures are one warning per
cause with a counter and a Prometheus metric. Mounting a tmpfs needs root; without it,
``tests/unit/core/test_sqlite_disk_full.py`` runs the same policy on a simulated small disk.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.testing import HashEmbedder

pytestmark = pytest.mark.integration

DISK = 3 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (tests/unit/core/test_sqlite_disk_full.py runs)")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:  # root without CAP_SYS_ADMIN (a container): say so
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _question(i: int) -> str:
    return f"question number {i} about topic {i * 7}"


def test_a_full_disk_keeps_answering_and_the_wal_leaves_the_space_to_entries(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    from agent_cache.metrics import PrometheusMetrics

    registry = prometheus_client.CollectorRegistry()
    caplog.set_level(logging.WARNING, logger="agent_cache")
    n = 3000  # ~2.6 MB of answers alone: the disk fills well before the end
    with LayeredCache(
        path=small_disk, embedder=HashEmbedder(), metrics=PrometheusMetrics(registry)
    ) as cache:
        stored = []
        for i in range(n):
            cache.store(_question(i), f"answer {i} " + "x" * 800)
            if cache.lookup(_question(i)) is not None:
                stored.append(i)
        hits = wrong = 0
        for i in range(n):
            hit = cache.lookup(_question(i))
            if hit is not None:
                hits += 1
                wrong += not str(hit.response).startswith(f"answer {i} ")
        counters = cache.stats().counters

    wal = (small_disk / "exact.sqlite3-wal").stat().st_size
    main = (small_disk / "exact.sqlite3").stat().st_size
    assert wrong == 0
    assert hits == len(stored)  # every entry that was stored is still served
    # before: 67 entries, a 3 MiB WAL; the database now holds the space
    assert hits >= 1000, (hits, main, wal)
    assert wal <= DISK // 8, (main, wal)

    full = {k: v for k, v in counters.items() if k.startswith("errors:") and "is full" in k}
    assert len(full) == 1 and next(iter(full.values())) >= n - hits
    warned = [
        r for r in caplog.records if r.levelno >= logging.WARNING and "is full" in r.getMessage()
    ]
    assert len(warned) == 1, [r.getMessage() for r in warned]
    metric = sum(
        sample.value
        for family in registry.collect()
        for sample in family.samples
        if sample.name == "agent_cache_events_total" and "is full" in sample.labels["event"]
    )
    assert metric == next(iter(full.values()))
