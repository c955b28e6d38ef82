"""KV events end to end: the faithful fake publisher (batches of several blocks,
duplicates, group_idx, restarts) against the index, a 16,000-token prompt through
``router.chat()`` over ZMQ, and a subscriber that outlives garbage."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

pytest.importorskip("zmq")
pytest.importorskip("msgspec")

from agent_cache.testing import FakeClock
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.kv_events import KvEventIndex, decode_event_batch
from agent_cache.vllm.testing import FakeVllm, KvEventPublisher, mock_transport


def tokenizer(prompt: str | Sequence[Any]) -> list[int]:
    text = prompt if isinstance(prompt, str) else FakeVllm.render(list(prompt))
    return FakeVllm.tokenize_text(text)


def wait_for(predicate: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for KV events")
        time.sleep(0.02)


class Captured(KvEventPublisher):
    """The publisher's batches, in process (no socket)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.sent: list[tuple[int, bytes]] = []

    def send_raw(self, payload: bytes, *, parts: Sequence[bytes] | None = None) -> None:
        self.sent.append((self._seq, payload))
        self._seq += 1


def drain(pub: Captured, index: KvEventIndex, replica: int = 0) -> list[list[dict[str, Any]]]:
    batches = []
    for seq, payload in pub.sent:
        _, events = decode_event_batch(payload)
        index.apply_batch(replica, events, seq=seq)
        batches.append(events)
    pub.sent.clear()
    return batches


@pytest.mark.parametrize(("duplicates", "groups"), [(False, 1), (True, 1), (True, 2)])
def test_the_index_follows_the_fakes_cache_through_evictions(duplicates: bool, groups: int) -> None:
    pub = Captured(duplicates=duplicates, groups=groups)
    fake = FakeVllm("a", capacity_blocks=40, kv_events=pub)
    index = KvEventIndex(1, block_size=16)
    body: dict[str, Any] = {"messages": []}
    for i in range(30):
        topic = f"topic {i % 7} " * (20 + i)
        body = {"messages": [{"role": "user", "content": topic + f"question {i}"}]}
        fake.respond("POST", "/v1/chat/completions", {}, json.dumps(body).encode())
        batches = drain(pub, index)
        if i == 0:  # one event for the whole new chain, per group and copy
            sizes = [len(e["block_hashes"]) for e in batches[0]]
            assert sizes == [len(fake.sim.cached_hashes())] * groups * (2 if duplicates else 1)
        assert index.blocks(0) == len(fake.sim.cached_hashes()), f"after request {i}"
    assert index.malformed == [0] and index.orphans == [0]
    prompt = tokenizer(body["messages"])
    assert (index.match(prompt)[0] or 0) * 16 == fake.sim.lookup(prompt)


def test_a_restarted_fake_drops_the_replicas_blocks() -> None:
    pub = Captured()
    fake = FakeVllm("a", kv_events=pub)
    index = KvEventIndex(1, block_size=16)
    body = b'{"messages": [{"role": "user", "content": "' + b"hello there " * 40 + b'"}]}'
    fake.respond("POST", "/v1/chat/completions", {}, body)
    fake.respond("POST", "/v1/chat/completions", {}, body.replace(b"hello", b"howdy"))
    drain(pub, index)
    assert index.blocks(0) > 0
    pub.restart()
    fake.sim = type(fake.sim)(16)  # a new process: an empty cache
    fake.sim.events = []
    fake.respond("POST", "/v1/chat/completions", {}, body.replace(b"hello", b"bye"))
    drain(pub, index)
    assert index.restarts == [1]
    assert index.blocks(0) == len(fake.sim.cached_hashes())


def test_zero_hits_report_zero_and_salts_follow_vllms_rules() -> None:
    fake = FakeVllm("a")
    client = httpx.Client(transport=mock_transport({"a:8000": fake}))
    url = "http://a:8000/v1/chat/completions"
    msgs = [{"role": "user", "content": "hi"}]
    usage = client.post(url, json={"messages": msgs}).json()["usage"]
    assert usage["prompt_tokens_details"] == {"cached_tokens": 0}
    assert client.post(url, json={"messages": msgs, "cache_salt": "x" * 129}).status_code == 400
    assert client.post(url, json={"messages": msgs, "cache_salt": "a/b"}).status_code == 400
    assert client.post(url, json={"messages": msgs, "cache_salt": "x" * 128}).status_code == 200
    assert client.post(url, json={"messages": msgs, "stream_options": {}}).status_code == 200


# ------------------------------------------------------------------ over ZMQ
def make_router(
    n: int, **fake_kw: Any
) -> tuple[VllmRouter, list[KvEventPublisher], list[FakeVllm]]:
    pubs = [KvEventPublisher().bind() for _ in range(n)]
    fakes = [FakeVllm(f"r{i}", kv_events=p, **fake_kw) for i, p in enumerate(pubs)]
    router = VllmRouter(
        [f"http://r{i}:8000/v1" for i in range(n)],
        client=httpx.Client(
            transport=mock_transport({f"r{i}:8000": f for i, f in enumerate(fakes)})
        ),
        kv_events=[p.endpoint for p in pubs],
        tokenizer=tokenizer,
        metrics_interval=None,
        clock=FakeClock(0.0),
        backoff_initial=0.0,
        generation_timeout=60.0,
        total_timeout=120.0,
    )
    router._d.start_events()
    time.sleep(0.3)  # ZMQ subscriptions take a moment to reach the publisher
    return router, pubs, fakes


def test_a_16k_token_prompt_goes_through_chat_and_a_second_replica_too() -> None:
    router, pubs, fakes = make_router(2)
    index = router._d.kv_index
    assert index is not None
    try:
        words = " ".join(f"w{i % 997}x{i // 997}" for i in range(16_000))
        convo = [{"role": "user", "content": words}]
        assert len(tokenizer(convo)) > 16_000
        router.chat(convo, max_tokens=1)
        home = next(i for i, f in enumerate(fakes) if f.api_requests())
        other = 1 - home
        wait_for(lambda: index.blocks(home) >= 1000)
        # the other replica announces the same prefix (it served it too)
        fakes[other].respond(
            "POST",
            "/v1/chat/completions",
            {},
            json.dumps({"messages": convo, "max_tokens": 1}).encode(),
        )
        wait_for(lambda: index.blocks(other) >= 1000)
        assert all(s._thread is not None and s._thread.is_alive() for s in router._d._subscribers)
        reply = router.chat([*convo, {"role": "user", "content": "and?"}], max_tokens=1)
        assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] >= 16_000
        assert index.malformed == [0, 0]
    finally:
        router.close()
        for p in pubs:
            p.close()


def test_the_subscriber_survives_garbage_frames() -> None:
    router, pubs, fakes = make_router(1)
    index = router._d.kv_index
    assert index is not None
    pub = pubs[0]
    try:
        stored, removed, _ = pub._schema()[:3]
        pub.send_raw(b"", parts=[b"only one part"])
        pub.send_raw(b"", parts=[b"", b"short", b"\x00"])
        pub.send_raw(b"\xc1 not msgpack")
        pub.send_raw(b"\x93\x01\x02\x03")  # msgpack, not a batch
        pub.send_raw(b"\x92\xa1x\x01")  # [ "x", 1 ]
        bad = pub.encode(
            [
                stored(
                    block_hashes=[1],
                    parent_block_hash=None,
                    token_ids=[1] * 16,
                    block_size=16,
                    lora_id=None,
                    medium="GPU",
                    extra_keys=[([{"nested": [1, 2]}, [3, [4]]],)],
                ),
                removed(block_hashes=[12345], medium="GPU"),
            ]
        )
        pub.send_raw(bad)
        import msgspec

        pub.send_raw(
            msgspec.msgpack.encode([0.0, [{"type": "BlockStored", "block_hashes": [[1]]}]])
        )
        pub.send_raw(msgspec.msgpack.encode([0.0, [{"type": "BlockStored", "token_ids": "x"}]]))
        body = b'{"messages": [{"role": "user", "content": "' + b"hello there " * 40 + b'"}]}'
        fakes[0].respond("POST", "/v1/chat/completions", {}, body)  # a good batch after
        wait_for(lambda: index.blocks(0) >= 5)
        sub = router._d._subscribers[0]
        assert sub._thread is not None and sub._thread.is_alive()
        assert sub.errors >= 4 and index.malformed[0] >= 6
    finally:
        router.close()
        pub.close()


def test_the_replay_socket_fills_in_blocks_from_before_the_start_and_gaps() -> None:
    import threading

    import zmq

    pub = KvEventPublisher().bind()
    stored = pub._schema()[0]

    def batch(h: int, token: int) -> bytes:
        block = stored(
            block_hashes=[h],
            parent_block_hash=None,
            token_ids=[token] * 16,
            block_size=16,
            lora_id=None,
            medium="GPU",
        )
        return pub.encode([block])

    buffer = [(seq, batch(seq + 1, seq + 1)) for seq in range(4)]  # vLLM's replay buffer
    router_sock: Any = zmq.Context.instance().socket(zmq.ROUTER)
    router_sock.setsockopt(zmq.LINGER, 0)
    router_sock.bind("tcp://127.0.0.1:*")
    replay = router_sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    stop = threading.Event()

    def serve() -> None:  # ZmqEventPublisher._service_replay
        end = (-1).to_bytes(8, "big", signed=True)
        while not stop.is_set():
            if not router_sock.poll(50):
                continue
            client, _, start = router_sock.recv_multipart()
            first = int.from_bytes(start, "big")
            for seq, payload in buffer:
                if seq >= first:
                    router_sock.send_multipart((client, b"", b"", seq.to_bytes(8, "big"), payload))
            router_sock.send_multipart((client, b"", b"", end, b""))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    router = VllmRouter(
        ["http://r0:8000/v1"],
        client=httpx.Client(transport=mock_transport({})),
        kv_events=[pub.endpoint],
        kv_replay=[replay],
        metrics_interval=None,
    )
    index = router._d.kv_index
    assert index is not None
    try:
        router._d.start_events()
        wait_for(lambda: index.blocks(0) == 4)  # cached before the router started
        time.sleep(0.3)
        buffer.extend((seq, batch(seq + 1, seq + 1)) for seq in range(4, 7))
        pub._seq = 6
        pub.send_raw(buffer[6][1])  # seqs 4 and 5 never arrived: asked for again
        wait_for(lambda: index.blocks(0) == 7)
        assert router._d._subscribers[0].replays == 2 and index.malformed == [0]
    finally:
        stop.set()
        router.close()
        server.join(timeout=2)
        router_sock.close(linger=0)
        pub.close()
