"""Affinity keys, rendezvous order, bounded load, /metrics parsing, SSE, vllm_command, CLI."""

from __future__ import annotations

from collections import Counter

import pytest

from agent_cache.cli import main
from agent_cache.errors import ConfigurationError
from agent_cache.testing import FakeClock
from agent_cache.vllm import (
    PrefixCacheMetrics,
    affinity_key,
    parse_prefix_cache_metrics,
    parse_prometheus_text,
    vllm_command,
    vllm_flags,
)
from agent_cache.vllm._endpoint import CircuitBreaker, split_base_url
from agent_cache.vllm._protocol import SseUsageSniffer, usage_counts
from agent_cache.vllm.affinity import BoundedLoad, key_covers_depth, rendezvous_order

SYS = {"role": "system", "content": "shared system prompt " * 100}


def test_affinity_key_skips_system_messages_and_reaches_into_the_documents() -> None:
    a = [SYS, {"role": "user", "content": "DOC-A " * 50 + "question 1"}]
    b = [SYS, {"role": "user", "content": "DOC-A " * 50 + "question 2"}]
    c = [SYS, {"role": "user", "content": "DOC-B " * 50 + "question 1"}]
    assert affinity_key(a, depth=200) == affinity_key(b, depth=200)
    assert affinity_key(a, depth=200) != affinity_key(c, depth=200)
    assert affinity_key(a, depth=200, namespace="x") != affinity_key(a, depth=200)
    other_sys = [{"role": "system", "content": "another app"}, a[1]]
    assert affinity_key(a, depth=200) != affinity_key(other_sys, depth=200)


def test_affinity_key_for_text_and_tokens() -> None:
    assert affinity_key("P" * 100 + "x", depth=50, skip=50) == affinity_key(
        "P" * 100 + "y", depth=50, skip=50
    )
    assert affinity_key("P" * 10 + "x", depth=50) != affinity_key("P" * 10 + "y", depth=50)
    assert affinity_key([1, 2, 3, 4], depth=2) == affinity_key([1, 2, 9], depth=2)
    with pytest.raises(ConfigurationError):
        affinity_key("x", depth=-1)


def test_key_covers_depth() -> None:
    assert not key_covers_depth([SYS], depth=10)
    assert key_covers_depth([SYS, {"role": "user", "content": "x" * 20}], depth=10)
    assert key_covers_depth("y" * 30, depth=10, skip=20)
    assert not key_covers_depth("y" * 29, depth=10, skip=20)


def test_rendezvous_is_stable_and_balanced_and_moves_little() -> None:
    names = ["a", "b", "c"]
    keys = [f"k{i}".encode() for i in range(3000)]
    firsts = Counter(rendezvous_order(k, names)[0] for k in keys)
    assert min(firsts.values()) > 850
    assert rendezvous_order(b"k1", names) == rendezvous_order(b"k1", names)
    # removing replica "c" only moves the keys that ranked it first
    moved = sum(
        1
        for k in keys
        if names[rendezvous_order(k, names)[0]] != "c"
        and names[rendezvous_order(k, names)[0]] != ["a", "b"][rendezvous_order(k, ["a", "b"])[0]]
    )
    assert moved == 0


def test_bounded_load_counts_in_flight_too() -> None:
    load = BoundedLoad(2, load_factor=1.0, window=0)
    load.in_flight[0] = 3
    assert load.pick([0, 1]) == 1  # 0 is over ceil((3 + 1) / 2) = 2
    with pytest.raises(ConfigurationError):
        BoundedLoad(2, load_factor=0.5)


def test_circuit_breaker_states() -> None:
    clock = FakeClock(0.0)
    b = CircuitBreaker(threshold=2, reset_timeout=5, clock=clock)
    b.failure()
    assert b.state == "closed" and b.available()
    b.failure()
    assert b.state == "open" and not b.available()
    clock.advance(5)
    assert b.available()
    b.acquire()
    assert b.state == "half_open" and not b.available()  # one trial at a time
    assert b.success() is True and b.state == "closed"
    assert b.success() is False


def test_split_base_url() -> None:
    assert split_base_url("http://h:8000/v1") == ("http://h:8000/v1", "http://h:8000")
    assert split_base_url("https://h/proxy/v1/") == ("https://h/proxy/v1", "https://h/proxy")
    assert split_base_url("http://h:8000") == ("http://h:8000", "http://h:8000")
    with pytest.raises(ConfigurationError):
        split_base_url("h:8000/v1")


METRICS = """\
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1200.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 800.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 600.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 200.0 1717000000000
vllm:num_requests_running{engine="0",model_name="m"} NaN
vllm:cache_config_info{block_size="16",enable_prefix_caching="True"} 1.0
"""


def test_metrics_parsing() -> None:
    m = parse_prefix_cache_metrics(METRICS)
    assert m == PrefixCacheMetrics(hits=800.0, queries=2000.0)
    assert m is not None and m.hit_rate == 0.4
    later = PrefixCacheMetrics(hits=900.0, queries=2100.0)
    assert (later - m).hit_rate == 1.0
    samples = parse_prometheus_text(METRICS)
    assert "vllm:num_requests_running" not in samples  # NaN dropped
    assert samples["vllm:cache_config_info"] == 1.0
    old = "vllm:gpu_prefix_cache_queries_total 10\nvllm:gpu_prefix_cache_hits_total 5\n"
    assert parse_prefix_cache_metrics(old) == PrefixCacheMetrics(5.0, 10.0)
    assert parse_prefix_cache_metrics("other_metric 1\n") is None
    assert PrefixCacheMetrics(0, 0).hit_rate == 0.0


def test_usage_counts_and_sse_sniffing() -> None:
    assert usage_counts(None) is None
    assert usage_counts({"prompt_tokens": 9}) == (9, 0)
    assert usage_counts({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": None}}) == (
        9,
        0,
    )
    sniffer = SseUsageSniffer()
    stream = (
        b'data: {"choices": [{"delta": {}}], "usage": null}\n\n'
        b'data: {"choices": [], "usage": {"prompt_tokens": 40, "prompt_tokens_details": '
        b'{"cached_tokens": 32}}}\n\ndata: [DONE]\n\n'
    )
    for i in range(0, len(stream), 7):  # split at arbitrary byte boundaries
        sniffer.feed(stream[i : i + 7])
    sniffer.close()
    assert usage_counts(sniffer.usage) == (40, 32)


def test_vllm_command_has_the_flags_and_reasons() -> None:
    text = vllm_command("Qwen/Qwen2.5-7B-Instruct", gpus=2, max_model_len=8192)
    for flag in (
        "vllm serve Qwen/Qwen2.5-7B-Instruct",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--gpu-memory-utilization 0.90",
        "--tensor-parallel-size 2",
        "--max-model-len 8192",
    ):
        assert flag in text
    # usage on every chunk is summed by LangChain; a fixed block size overrides the backend
    assert "--enable-force-include-usage" not in text
    assert "--block-size" not in text
    assert "--block-size 64" in vllm_command("m", block_size=64)
    # the seed and hash algorithm are not needed (sha256 has a fixed seed; the router
    # keys blocks by tokens); the KV-event publisher is, with the version checked
    assert "PYTHONHASHSEED" not in text and "sha256_cbor" not in text
    assert text.splitlines()[0] == "## flags checked against vLLM 0.33.0"
    config = '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557"'
    assert f"--kv-events-config '{config}" in text
    assert '"replay_endpoint":"tcp://*:5558"' in vllm_command("m", kv_replay_port=5558)
    assert "--kv-events-config" not in vllm_command("m", kv_events_port=None)
    comments = [line for line in text.splitlines() if line.startswith("# ")]
    assert len(comments) == len(vllm_flags("m", gpus=2, max_model_len=8192))
    assert all(len(c.split(None, 2)) == 3 for c in comments)  # every flag has a reason
    assert "--tensor-parallel-size" not in vllm_command("m")
    assert "'my model'" in vllm_command("my model")  # shell-quoted
    with pytest.raises(ConfigurationError):
        vllm_command("m", gpus=0)


def test_cli_vllm_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm-command", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpus", "4"]) == 0
    out = capsys.readouterr().out
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in out
    assert "--tensor-parallel-size 4" in out
    assert main(["vllm-command", "--model", "m", "--gpus", "0"]) == 2
