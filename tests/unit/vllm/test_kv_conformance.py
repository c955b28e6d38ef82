"""Messages built with vLLM's own msgspec classes decode through our reader.

The structs below are copied from vLLM 0.33.0's ``vllm/distributed/kv_events.py``
(``EventBatch``, ``KVCacheEvent``, ``BlockStored``, ``BlockRemoved``,
``AllBlocksCleared``, ``KVEventBatch``; methods left out), and the extra keys are shaped
as its ``to_event_extra_keys`` publishes them (``vllm/v1/core/kv_cache_utils.py``):
the LoRA name, ``(mm_identifier, offset)`` pairs, the ``cache_salt`` on block 0. Block
hashes are sha256 bytes (the default) or 64-bit ints
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

msgspec = pytest.importorskip("msgspec")

from agent_cache.vllm.kv_events import VLLM_VERSION, KvEventIndex, decode_event_batch  # noqa: E402

SCHEMA_VERSION = "0.33.0"
ExternalBlockHash = bytes | int


# ---- copied from vllm 0.33.0 vllm/distributed/kv_events.py -------------------------
class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):  # type: ignore[misc,call-arg]
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):  # type: ignore[misc,call-arg]
    """Base class for all KV cache-related events."""


class BlockStored(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]  # type: ignore[assignment]


# ------------------------------------------------------------------------------------


def sha(*parts: Any) -> bytes:
    return hashlib.sha256(repr(parts).encode()).digest()


def test_the_schema_is_the_version_the_reader_follows() -> None:
    assert VLLM_VERSION == SCHEMA_VERSION


@pytest.mark.parametrize("int_hashes", [False, True])
def test_vllm_batches_decode_and_index(int_hashes: bool) -> None:
    b = 4
    tokens = list(range(1, 13))  # three blocks
    hashes: list[Any] = [sha("h", i) for i in range(3)]
    if int_hashes:
        hashes = [int.from_bytes(h, "big") & ((1 << 64) - 1) for h in hashes]
    extra: list[tuple[Any, ...] | None] = [
        ("sql-lora", "salt-1"),
        ("sql-lora", ("img-7f3a", 2)),  # an image from the block's 3rd token
        ("sql-lora",),
    ]
    enc = msgspec.msgpack.Encoder()
    first = KVEventBatch(
        ts=1.0,
        events=[
            BlockStored(
                block_hashes=hashes[:1],
                parent_block_hash=None,
                token_ids=tokens[:4],
                block_size=b,
                lora_id=3,
                medium="GPU",
                lora_name="sql-lora",
                extra_keys=extra[:1],
                group_idx=0,
                kv_cache_spec_kind="full_attention",
                session_id="s-1",
            ),
            BlockStored(  # the chain continued, two blocks in one event
                block_hashes=hashes[1:],
                parent_block_hash=hashes[0],
                token_ids=tokens[4:],
                block_size=b,
                lora_id=3,
                medium="GPU",
                lora_name="sql-lora",
                extra_keys=extra[1:],
                group_idx=0,
                lookahead_token_ids=[[9], [9]],
            ),
            BlockStored(  # the same blocks offloaded to the CPU tier
                block_hashes=hashes[:1],
                parent_block_hash=None,
                token_ids=tokens[:4],
                block_size=b,
                lora_id=3,
                medium="CPU",
                lora_name="sql-lora",
                extra_keys=extra[:1],
                group_idx=0,
            ),
        ],
        data_parallel_rank=0,
    )
    ts, events = decode_event_batch(enc.encode(first))
    assert ts == 1.0 and [e["type"] for e in events] == ["BlockStored"] * 3
    index = KvEventIndex(1, block_size=b)
    index.apply_batch(0, events, seq=0)
    assert index.malformed == [0] and index.blocks(0) == 3
    query = [*tokens, 0]
    # the request's keys: LoRA on every block, salt on block 0; the image block is
    # another request's (the router does not know the image's identifier)
    assert index.match(query, salt="salt-1", lora="sql-lora") == [1]
    assert index.match(query, salt="salt-1") == [0]

    second = KVEventBatch(
        ts=2.0,
        events=[
            BlockRemoved(block_hashes=hashes[:1], medium="GPU", group_idx=0),
            AllBlocksCleared(),
        ],
    )
    _, events = decode_event_batch(enc.encode(second))
    index.apply_batch(0, events[:1], seq=1)
    assert index.match(query, salt="salt-1", lora="sql-lora") == [0]  # only on the CPU
    assert index.lookup(query, salt="salt-1", lora="sql-lora").tokens == [2.0]
    index.apply_batch(0, events[1:], seq=2)
    assert index.blocks(0) == 0


def test_array_like_events_of_older_releases_decode() -> None:
    class OldStored(msgspec.Struct, array_like=True, omit_defaults=True, tag="BlockStored"):  # type: ignore[misc,call-arg]
        block_hashes: list[int]
        parent_block_hash: int | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None

    batch = EventBatch(ts=0.5, events=[OldStored([5], None, [1, 2], 2, None, "GPU")])
    _, events = decode_event_batch(msgspec.msgpack.encode(batch))
    index = KvEventIndex(1, block_size=2)
    index.apply_batch(0, events, seq=0)
    assert index.match([1, 2, 3]) == [1]
