"""One reader for the usage an OpenAI-compatible server reports."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agent_cache.usage import ModelUsage, parse_usage, response_usage
from agent_cache.vllm._protocol import usage_counts


def test_chat_completion_usage_with_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 96},
    }
    assert parse_usage(usage) == ModelUsage(120, 30, 96, 150)
    assert usage_counts(usage) == (120, 96)  # the router's KV-layer counts read the same


@pytest.mark.parametrize("details", [None, {}, {"cached_tokens": None}])
def test_missing_or_null_details_mean_nothing_cached(details: object) -> None:
    got = parse_usage(
        {"prompt_tokens": 9, "completion_tokens": 2, "prompt_tokens_details": details}
    )
    assert got == ModelUsage(9, 2, 0, 11)  # no total sent: prompt + completion


def test_responses_api_usage() -> None:
    usage = {"input_tokens": 40, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 16}}
    assert parse_usage(usage) == ModelUsage(40, 5, 16, 45)


def test_sdk_objects_are_read_like_json() -> None:
    usage = SimpleNamespace(
        prompt_tokens=7,
        completion_tokens=3,
        total_tokens=10,
        prompt_tokens_details=SimpleNamespace(cached_tokens=4),
    )
    assert parse_usage(usage) == ModelUsage(7, 3, 4, 10)
    assert response_usage(SimpleNamespace(usage=usage)) == ModelUsage(7, 3, 4, 10)


@pytest.mark.parametrize("usage", [None, {}, "12", 12, {"prompt_tokens": True}, {"x": 1}])
def test_no_usage_is_none(usage: object) -> None:
    assert parse_usage(usage) is None


def test_odd_counts_are_left_out_not_trusted() -> None:
    got = parse_usage({"prompt_tokens": -5, "completion_tokens": 3.0, "total_tokens": "9"})
    assert got == ModelUsage(0, 3, 0, 3)


def test_response_usage_of_a_body() -> None:
    assert response_usage({"choices": []}) is None
    assert response_usage(None) is None
    body = {"usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert response_usage(body) == ModelUsage(5, 1, 0, 6)
    assert ModelUsage(5, 1, 0, 6).as_dict()["total_tokens"] == 6


def test_the_llamaindex_codec_reads_usage_through_the_core() -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse
    from llama_index.llms.agent_cache import _codec

    details = SimpleNamespace(cached_tokens=32)
    sdk = SimpleNamespace(
        usage=SimpleNamespace(
            prompt_tokens=40, completion_tokens=8, total_tokens=48, prompt_tokens_details=details
        )
    )
    message = ChatMessage(role="assistant", content="hi")
    assert _codec.usage(ChatResponse(message=message, raw=sdk)) == (48, 40, 32)
    raw = {"usage": {"prompt_tokens": 40, "completion_tokens": 8, "prompt_tokens_details": None}}
    assert _codec.usage(ChatResponse(message=message, raw=raw)) == (48, 40, 0)
    assert _codec.usage(ChatResponse(message=message)) == (None, None, None)
