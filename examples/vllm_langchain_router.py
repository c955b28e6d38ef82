"""LangChain ``ChatOpenAI`` through agent-cache's vLLM router, with the cached-token share.

A small RAG workload (8 questions over two shared sets of documents) is sent by LangChain's
own OpenAI client; ``router.httpx_client()`` re-targets every request to the replica that
already holds its prefix. The documents are put in one stable order (``order_documents``)
and laid out system -> documents -> question (``StablePrompt``), so vLLM's prefix cache
serves everything but the question. The table compares the router's per-endpoint counts
with what LangChain reports (``usage_metadata["input_token_details"]["cache_read"]``).

Run: ``python examples/vllm_langchain_router.py`` (two vLLM stubs on loopback, offline), or
against real vLLM replicas (``agent-cache vllm-command --model M`` prints the serve command):
``python examples/vllm_langchain_router.py --url http://gpu-1:8000/v1,http://gpu-2:8000/v1``
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
from langchain_openai import ChatOpenAI

from agent_cache.prompt import StablePrompt, order_documents
from agent_cache.vllm import VllmRouter
from agent_cache.vllm.testing import FakeVllm, FakeVllmServer

DOCS = {  # two topics, three documents each: retrieval returns them in varying order
    "billing": {
        "refunds": "Refunds go to the original payment method within five business days.",
        "invoices": "Invoices are emailed monthly and can be downloaded as PDF files.",
        "plans": "The team plan costs twelve dollars per seat; annual billing saves two months.",
    },
    "shipping": {
        "delivery": "Standard delivery takes two to four days; express arrives the next day.",
        "tracking": "A tracking link is emailed when the parcel leaves the warehouse.",
        "returns": "Returns are free within thirty days with the label from the orders page.",
    },
}
WORKLOAD = [  # (topic, question): 8 questions, alternating topics
    ("billing", "How long do refunds take?"),
    ("shipping", "When does express delivery arrive?"),
    ("billing", "Where can I download my invoices?"),
    ("shipping", "How do I track my parcel?"),
    ("billing", "How much is the team plan?"),
    ("shipping", "Are returns free?"),
    ("billing", "Does annual billing save money?"),
    ("shipping", "How long does standard delivery take?"),
]
SYSTEM = (
    "You are the support assistant of an online shop. Answer only from the documents given "
    "with the question; when they do not contain the answer, say so. Keep answers short."
)
PROMPT = StablePrompt(SYSTEM, doc_order="given")  # order_documents gives the order
FIELDS = ("requests", "prompt_tokens", "cached_tokens", "cached_share")  # of EndpointStats


@contextlib.contextmanager
def endpoints(url: str | None) -> Iterator[list[str]]:
    """The given base URLs, or two vLLM stubs on loopback (stopped on exit)."""
    if url:
        yield [u.strip() for u in url.split(",") if u.strip()]
        return
    servers = [FakeVllmServer(FakeVllm(f"replica-{i}")).start() for i in range(2)]
    try:
        yield [s.base_url for s in servers]
    finally:
        for s in servers:
            s.stop()


def served_model(base_url: str) -> str:
    """The first model id the server lists (``GET /v1/models``)."""
    return str(httpx.get(base_url.rstrip("/") + "/models", timeout=10).json()["data"][0]["id"])


def main(url: str | None = None, model: str | None = None) -> dict[str, Any]:
    """Run the workload; print and return per-endpoint and LangChain-reported tokens."""
    lc_prompt = lc_cached = 0
    with endpoints(url) as urls, VllmRouter(urls) as router:
        llm = ChatOpenAI(
            base_url=urls[0],
            api_key="x",
            model=model or served_model(urls[0]),
            http_client=router.httpx_client(),
            max_retries=0,
            max_tokens=32,
            temperature=0,
            use_responses_api=False,
        )
        for i, (topic, question) in enumerate(WORKLOAD):
            docs = [{"id": k, "content": v} for k, v in DOCS[topic].items()]
            retrieved = docs[i % 3 :] + docs[: i % 3]  # the retriever's order varies
            reply = llm.invoke(PROMPT.to_messages(question, order_documents(retrieved)))
            usage = reply.usage_metadata  # from the OpenAI response's usage
            if usage is not None:  # cache_read: usage.prompt_tokens_details.cached_tokens
                lc_prompt += usage["input_tokens"]
                lc_cached += usage.get("input_token_details", {}).get("cache_read", 0)
        rows = {u: {k: getattr(s, k) for k in FIELDS} for u, s in router.stats().items()}
    result: dict[str, Any] = {k: sum(r[k] for r in rows.values()) for k in FIELDS[:3]}
    result["cached_share"] = result["cached_tokens"] / max(result["prompt_tokens"], 1)
    result.update(endpoints=rows, framework_prompt_tokens=lc_prompt)
    result.update(framework_cached_tokens=lc_cached)
    print_table(result, "LangChain usage_metadata")
    return result


def print_table(result: dict[str, Any], source: str) -> None:
    """Requests, prompt and cached tokens per endpoint, the total, and the framework's view."""
    print(f"{'endpoint':<32} {'requests':>8} {'prompt':>8} {'cached':>8} {'share':>7}")
    for u, r in [*result["endpoints"].items(), ("total (router.stats())", result)]:
        print(f"{u:<32} " + " ".join(f"{r[k]:>8}" for k in FIELDS[:3]) + f"{r[FIELDS[3]]:>8.1%}")
    fp, fc = result["framework_prompt_tokens"], result["framework_cached_tokens"]
    agrees = (fp, fc) == (result["prompt_tokens"], result["cached_tokens"])
    print(f"{source:<32} {'':>8} {fp:>8} {fc:>8}{fc / max(fp, 1):>8.1%}  agrees: {agrees}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="comma-separated OpenAI base URLs (default: 2 stubs)")
    parser.add_argument("--model", help="model name (default: the first one the server lists)")
    args = parser.parse_args()
    main(args.url, args.model)
