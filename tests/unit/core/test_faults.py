"""Faults are loud when they must be, and bounded when they may be."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cache import LayeredCache
from agent_cache.errors import BackendError
from agent_cache.stores import SQLiteStore
from agent_cache.testing import HashEmbedder


def _corrupt(path: Path) -> Path:
    db = path / "exact.sqlite3"
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"this is not a database, it was overwritten" * 200)
    return db


def test_a_corrupt_sqlite_file_is_a_loud_backend_error_naming_it(tmp_path: Path) -> None:
    db = _corrupt(tmp_path)
    cache = LayeredCache(path=tmp_path, embedder=HashEmbedder())
    for call in (lambda: cache.lookup("q?"), lambda: cache.store("q?", "a")):
        with pytest.raises(BackendError, match="corrupt") as info:
            call()
        assert str(db) in str(info.value) and "on_corrupt='rebuild'" in str(info.value)
    assert db.read_bytes().startswith(b"this is not a database")  # left alone


def test_on_corrupt_rebuild_moves_the_file_aside_and_starts_empty(tmp_path: Path) -> None:
    _corrupt(tmp_path)
    with LayeredCache(path=tmp_path, embedder=HashEmbedder(), on_corrupt="rebuild") as cache:
        with pytest.warns(RuntimeWarning, match="moved to"):
            assert cache.lookup("q?") is None
        cache.store("q?", "a")
        hit = cache.lookup("q?")
        assert hit is not None and hit.response == "a"
    aside = list(tmp_path.glob("exact.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b"this is not a database")


def test_on_corrupt_is_validated() -> None:
    from agent_cache.errors import ConfigurationError

    with pytest.raises(ConfigurationError):
        LayeredCache(path=None, on_corrupt="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        SQLiteStore("x.db", on_corrupt="ignore")  # type: ignore[arg-type]
