"""The KV-event routing bench: its routers really match on events, its streams, and
where its markdown goes (inside the prefix section, the rest kept)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent_cache.bench import prefix_kv, routing
from agent_cache.bench.prefix import SECTION_END, SECTION_START
from agent_cache.errors import ConfigurationError


def test_the_kv_contenders_watch_every_replica() -> None:
    """The earlier bench built its KV router with ``kv_events=[None] * n``: no replica
    was watched, so every match fell back to the prefix tree."""
    for name in ("KV events + load", "KV events + speculative + load"):
        con = routing._Contender(name, 3, 100, prefix_kv.WordTokens(), [0.0], 4.0)
        assert con.router is not None
        index = con.router._d.kv_index
        assert index is not None
        assert not any(index.stale(i) for i in range(3))
        assert index.speculative_ttl == (routing.SPECULATIVE_TTL_S if "spec" in name else 0.0)


def test_a_fan_out_burst_stays_together_only_with_speculative_entries() -> None:
    tokens = prefix_kv.WordTokens()
    sessions = routing.fanout_sessions(
        1,
        1.0,
        random.Random(0),
        "system",
        ["alpha", "beta", "gamma"],
        agents=4,
        steps=1,
        context_words=1500,
    )
    assert (
        len(sessions) == 4 and len({tuple(s.turns[0].messages[1].values()) for s in sessions}) == 1
    )
    shares = {
        c: routing.run_stream(
            sessions, c, replicas=4, capacity_blocks=2048, tokens=tokens, chars_per_token=None
        )["cached_share"]
        for c in ("round-robin", "KV events + load", "KV events + speculative + load")
    }
    # the burst arrives before the first prefill's events: only speculation keeps it
    assert shares["KV events + speculative + load"] > shares["KV events + load"] + 0.3
    assert shares["KV events + load"] == pytest.approx(shares["round-robin"], abs=0.05)


def test_a_restart_empties_the_replica_and_the_index_sees_the_reset() -> None:
    tokens = prefix_kv.WordTokens()
    sessions = routing.long_rag_sessions(
        6, 5.0, random.Random(1), ["w"], corpora=1, lo_words=600, hi_words=700
    )
    row = routing.run_stream(
        sessions,
        "KV events + load",
        replicas=2,
        capacity_blocks=4096,
        tokens=tokens,
        restart=(sessions[3].start - 1e-6, 0),
    )
    assert row["requests"] == 6 and row["pick_us_mean"] > 0 and 0 < row["busiest_share"] <= 1


def test_the_section_goes_inside_the_prefix_section_and_is_replaced(tmp_path: Path) -> None:
    doc = tmp_path / "b.md"
    head, tail = "# Bench\n\nintro\n", "\n<!-- bench:other:start -->x<!-- bench:other:end -->\n"
    doc.write_text(f"{head}{SECTION_START}\nprefix text\n{SECTION_END}{tail}")
    prefix_kv.write_kv_section(doc, f"{prefix_kv.KV_START}\nfirst\n{prefix_kv.KV_END}")
    text = doc.read_text()
    assert text.startswith(head) and text.endswith(tail)
    assert text.index("prefix text") < text.index("first") < text.index(SECTION_END)
    prefix_kv.write_kv_section(doc, f"{prefix_kv.KV_START}\nsecond\n{prefix_kv.KV_END}")
    text = doc.read_text()
    assert "first" not in text and text.count(prefix_kv.KV_START) == 1 and "second" in text
    assert text.startswith(head) and text.endswith(tail)
    bare = tmp_path / "c.md"
    bare.write_text("nothing here\n")
    with pytest.raises(ConfigurationError):
        prefix_kv.write_kv_section(bare, "x")
