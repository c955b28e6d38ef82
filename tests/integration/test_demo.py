"""``agent-cache demo`` end to end: the real local model, the embedded default cache."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from agent_cache.demo import add_arguments, run_demo
from agent_cache.demo.corpus import AGENT_TASKS, RAG_QUESTIONS, retrieve, route_tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return run_demo(quiet=True)


def _pass2(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in result["rows"] if r["phase"] == "pass2"]


def test_pass1_starts_empty_and_calls_the_model(result: dict[str, Any]) -> None:
    requests = len(RAG_QUESTIONS) + len(AGENT_TASKS)
    assert result["pass1"]["requests"] == requests
    assert result["pass1"]["model_calls"] == requests  # a fresh cache: nothing to hit
    assert result["pass1"]["hits"] == {}
    assert result["baseline"]["model_calls"] == requests


def test_pass2_hits_every_expected_layer(result: dict[str, Any]) -> None:
    expected = {r["expect"] for r in _pass2(result)} - {"miss"}
    assert expected >= {"exact", "template", "semantic"}
    for layer in expected:
        assert result["pass2"]["hits"].get(layer, 0) > 0, layer


def test_pass2_makes_fewer_model_calls(result: dict[str, Any]) -> None:
    assert result["pass2"]["model_calls"] < result["pass1"]["model_calls"]
    assert result["model_calls_avoided"] == (
        result["pass2"]["requests"] - result["pass2"]["model_calls"]
    )
    assert result["model_calls_avoided"] > 0
    assert result["tool_calls_avoided"] > 0


def test_near_miss_goes_to_the_model(result: dict[str, Any]) -> None:
    near = result["near_misses"]
    assert {r["workload"] for r in near} == {"rag", "agent"}
    for row in near:
        assert row["served_by"] == "model", row
        assert row["tokens_spent"] > 0
        if row["workload"] == "agent":
            assert row["tool"] == "called", row  # another order id: the tool ran again
    # the RAG near-miss shares the documents (scope) and passes the cosine threshold:
    # the negation guard is what refuses it
    assert result["stats"]["refused"].get("negation", 0) >= 1


def test_hits_serve_the_pass1_answer(result: dict[str, Any]) -> None:
    pass1 = {r["question"]: r["answer"] for r in result["rows"] if r["phase"] == "pass1"}
    hits = [r for r in _pass2(result) if r["served_by"] != "model"]
    assert hits
    for row in hits:
        assert row["matched"] in pass1, row
        assert row["answer"] == pass1[row["matched"]]
        assert row["tokens_saved"] > 0


def test_tokens_saved_agree_with_the_cache_counters(result: dict[str, Any]) -> None:
    assert result["tokens_saved"] > 0
    # the counters also count the (estimated) size of tool results served from the cache
    assert result["stats"]["tokens_saved"] >= result["tokens_saved"]
    assert sum(result["stats"]["hits"].values()) >= sum(result["pass2"]["hits"].values())


def test_cache_is_faster_than_the_baseline(result: dict[str, Any]) -> None:
    assert result["pass2"]["latency_p50_ms"] < result["baseline"]["latency_p50_ms"]


def test_output_has_the_tables(result: dict[str, Any]) -> None:
    out = result["output"]
    for heading in ("Pass 1", "Pass 2", "Hits per layer", "Work done", "Latency per request"):
        assert heading in out
    assert "baseline, measured" in out


def test_paraphrases_retrieve_the_same_docs() -> None:
    # a paraphrase with other documents would be a (correct) scope miss, not a demo of hits
    for q in RAG_QUESTIONS:
        if q.expect != "miss":
            assert retrieve(q.question) == retrieve(q.rephrased), q
    for t in AGENT_TASKS:
        same = route_tool(t.task) == route_tool(t.rephrased)
        assert same == (t.expect != "miss"), t


def test_add_arguments() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--llm-url", "http://127.0.0.1:1/v1", "--threshold", "0.9"])
    assert (args.llm_url, args.path, args.threshold) == ("http://127.0.0.1:1/v1", None, 0.9)
