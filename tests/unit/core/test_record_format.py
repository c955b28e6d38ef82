"""The stored record (issue 21): one encoder and decoder (``Record``), and the format
stays byte-compatible with what earlier versions wrote, so old files still read."""

from __future__ import annotations

import pytest

from agent_cache import LayeredCache, TtlPolicy
from agent_cache import _request as rq
from agent_cache._hits import hit_from_record
from agent_cache.errors import SerializationError
from agent_cache.savings import Usage
from agent_cache.testing import HashEmbedder

KEY = "agent_cache:" + "ab" * 32
#: What the code before ``Record`` wrote (``encode_record``), byte for byte.
WRITTEN = (
    '{"p": "What is RAG?", "r": {"text": "Retrieval-augmented généré"}, '
    '"t": {"input": 12, "output": 30}, "c": 1767225600.5, "tier": "long", '
    '"x": 1767312000.5, "k": "' + KEY + '"}'
)
LEGACY = '{"p": "Hi", "r": "Hello", "t": 7, "c": 3.0, "tier": "", "x": null}'


def test_a_record_written_by_earlier_code_decodes_and_encodes_back_byte_for_byte() -> None:
    record = rq.Record.decode(WRITTEN, KEY)
    assert record == rq.Record(
        "What is RAG?",
        {"text": "Retrieval-augmented généré"},
        tokens={"input": 12, "output": 30},
        created=1767225600.5,
        tier="long",
        expires=1767312000.5,
        key=KEY,
    )
    assert record.encode() == WRITTEN
    assert record.usage == Usage(12, 30, 0)
    assert record.expires_at == 1767312000.5
    assert record.mismatch(KEY, None) is None
    assert record.mismatch("agent_cache:" + "cd" * 32, None) == "key"


def test_a_record_from_before_keys_were_written_decodes_and_encodes_back() -> None:
    record = rq.Record.decode(LEGACY, KEY)
    assert (record.prompt, record.response, record.key) == ("Hi", "Hello", None)
    assert record.usage == Usage(0, 0, 7) and record.expires_at is None
    assert record.mismatch(KEY, None) is None  # no key to check: the prompt is checked
    assert record.encode() == LEGACY


def test_odd_fields_of_another_writer_read_as_absent() -> None:
    record = rq.Record.decode('{"r": 1, "p": 5, "t": "many", "c": "now", "x": "later"}', KEY)
    assert record.prompt is None and record.created is None and record.expires is None
    assert record.tokens == "many" and record.usage is None  # kept as stored, not used
    hit = hit_from_record(record, "semantic", 0.9, KEY, "default")
    assert (hit.response, hit.matched_prompt, hit.usage, hit.expires_at) == (1, "", None, None)


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '{"p": "no response"}', ""])
def test_text_that_is_not_a_record_is_refused(raw: str) -> None:
    with pytest.raises(SerializationError, match="corrupt cache record"):
        rq.Record.decode(raw, KEY)


def test_a_peeked_hit_carries_its_usage_and_expiry() -> None:
    """The cross-process single-flight's peek builds its hit through the same decoder."""
    now = [1000.0]
    cache = LayeredCache(
        embedder=HashEmbedder(),
        clock=lambda: now[0],
        ttl_policy=TtlPolicy(default_ttl=3600, jitter=0.0, tiers=()),
    )
    cache.store("What is RAG?", "Retrieval.", ttl=60, tokens={"input": 3, "output": 4})
    req = cache._prepare("What is RAG?", "", "default", None, "")
    hit = cache._reader.peek(req)
    assert hit is not None and hit.response == "Retrieval."
    assert hit.usage == Usage(3, 4, 0)
    assert hit.expires_at == pytest.approx(1060.0)
    looked_up = cache.lookup("What is RAG?")
    assert looked_up is not None and looked_up.expires_at == hit.expires_at
    assert looked_up.usage == hit.usage
