"""LangChain RAG with agent-cache, against a real local model (SmolLM2 on llama.cpp).

What it shows:

- ``StableContextOrderer`` + ``stable_rag_prompt``: retrieval returns the same documents in
  a different order each time; the prompt still comes out identical up to the question
  (the longest shared prefix for vLLM's prefix cache, and one cache scope).
- ``CachedChatModel``: a repeated question is an exact hit, a paraphrase a semantic hit
  (only the question is embedded; the documents are the scope); ``.stream()`` on a hit
  replays the answer as chunks.
- ``set_llm_cache(AgentCache(...))``: the same cache behind LangChain's global LLM cache.

Run: ``python examples/langchain_rag.py`` (starts the model server on loopback, offline),
or ``python examples/langchain_rag.py http://127.0.0.1:8000/v1`` for a running server.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
from langchain_agent_cache import (
    AgentCache,
    CachedChatModel,
    StableContextOrderer,
    format_documents,
    stable_rag_prompt,
)
from langchain_core.documents import Document
from langchain_core.globals import set_llm_cache
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_openai import ChatOpenAI

from agent_cache import LayeredCache
from agent_cache.local_llm import LocalLlamaServer

DOCS = [
    Document("Refunds are paid back to the original card within 5 business days.",
             metadata={"id": "refunds"}),
    Document("Orders over 50 euros ship for free; others cost 4 euros.",
             metadata={"id": "shipping"}),
    Document("Acme Books is an online bookshop based in Lyon.", metadata={"id": "about"}),
]
PROMPT = stable_rag_prompt(
    "You are Acme Books' support assistant.",
    static_knowledge="Support hours: 9:00-17:00, Monday to Friday.",
    instructions="Answer in one short sentence using only the documents.",
)


class Retriever:
    """A toy keyword retriever that returns its hits in a different order every call."""

    def __init__(self) -> None:
        self.calls = 0
        self.orders: list[list[str]] = []

    def __call__(self, question: str) -> list[Document]:
        words = question.lower()
        hits = [d for d in DOCS if d.metadata["id"] == "about" or d.metadata["id"][:-1] in words]
        self.calls += 1
        shift = self.calls % len(hits)
        ordered = hits[shift:] + hits[:shift]
        self.orders.append([d.metadata["id"] for d in ordered])
        return ordered


def model_id(base_url: str) -> str:
    """The first model the OpenAI-compatible server lists."""
    return str(httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"])


@contextlib.contextmanager
def local_model(base_url: str | None) -> Iterator[str]:
    """``base_url`` as given, or a SmolLM2 server started (and stopped) here."""
    if base_url:
        yield base_url
        return
    with LocalLlamaServer(n_ctx=2048) as server:
        yield server.base_url


def build_chain(chat: Runnable[Any, AIMessage], retriever: Retriever) -> Runnable[str, AIMessage]:
    """question -> ordered documents -> stable prompt -> cached chat model."""
    context = RunnableLambda(retriever) | StableContextOrderer() | RunnableLambda(format_documents)
    return {"context": context, "question": RunnablePassthrough()} | PROMPT | chat


def main(base_url: str | None = None) -> dict[str, Any]:
    """Run the walkthrough; returns what happened (model requests, hit layers, ...)."""
    requests: list[str] = []
    with local_model(base_url) as url, tempfile.TemporaryDirectory() as path, \
            LayeredCache(path=path) as cache:  # fmt: skip
        http = httpx.Client(event_hooks={"request": [lambda r: requests.append(r.url.path)]})
        llm = ChatOpenAI(base_url=url, api_key="x", model=model_id(url),  # type: ignore[arg-type]
                         temperature=0, extra_body={"max_tokens": 48}, http_client=http)
        chat = CachedChatModel(llm=llm, cache=cache)
        retriever = Retriever()
        chain = build_chain(chat, retriever)

        layers: list[str] = []
        for question in ["How long do refunds take?",      # miss: the model answers
                         "How long do refunds take?",      # exact hit
                         "How long does a refund take?"]:  # paraphrase: semantic hit
            answer = chain.invoke(question)
            hit = answer.response_metadata.get("agent_cache")
            layers.append(hit["layer"] if hit and hit["hit"] else "model")
            print(f"{question!r:34} [{layers[-1]:8}] {answer.content}")
        print("retrieval orders:", retriever.orders, "-> one prompt prefix")

        chunks = [c.content for c in chain.stream("How long do refunds take?")]
        print(f"stream replay of a hit: {len(chunks)} chunks: {chunks[:6]}...")
        chain_requests = len(requests)

        set_llm_cache(AgentCache(cache))  # the same cache behind LangChain's global hook
        try:
            plain = ChatOpenAI(base_url=url, api_key="x", model=model_id(url),  # type: ignore[arg-type]
                               temperature=0, extra_body={"max_tokens": 24}, http_client=http)
            before = len(requests)
            first = plain.invoke("Name one famous French author.")
            second = plain.invoke("Name one famous French author.")
            global_calls = len(requests) - before
        finally:
            set_llm_cache(None)
        print(f"set_llm_cache: 2 invokes, {global_calls} model request(s); {second.content!r}")
        print(cache.stats())
        return {
            "layers": layers,
            "model_requests": chain_requests,
            "retrieval_orders": retriever.orders,
            "stream_chunks": len(chunks),
            "streamed_text": "".join(str(c) for c in chunks),
            "global_cache_requests": global_calls,
            "global_answers_equal": first.content == second.content,
        }


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
