"""LlamaIndex RAG on agent-cache: ``Settings.llm = CachedLLM(...)`` + a stable-prefix postprocessor.

A real local model (SmolLM2-135M on llama.cpp's OpenAI-compatible server, started here
unless ``--llm-url`` points at a running one, e.g. vLLM) answers questions over a small
FAQ index embedded with the bundled all-MiniLM-L6-v2. Shown:

* a repeated question is an exact hit, a paraphrase a semantic hit: the cache embeds
  the *question* (recovered from LlamaIndex's QA template), scoped by the retrieved
  context, never the whole rendered prompt;
* ``StablePrefixPostprocessor`` renders the same retrieved set in the same order, so
  the paraphrase sees the same context (and vLLM would reuse the prompt's KV blocks);
* a streamed query is replayed word by word from the cache;
* hits are visible as LlamaIndex instrumentation events.

Run: ``python examples/llamaindex_query_engine.py [--llm-url http://127.0.0.1:8000/v1]``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from typing import Any

import httpx
from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.schema import TextNode
from llama_index.embeddings.huggingface import HuggingFaceEmbedding
from llama_index.llms.agent_cache import CachedLLM, CacheHitEvent
from llama_index.llms.openai_like import OpenAILike
from llama_index.postprocessor.agent_cache import StablePrefixPostprocessor

from agent_cache import LayeredCache
from agent_cache.embedders import DEFAULT_EMBEDDER, resolve_model_path
from agent_cache.local_llm import LocalLlamaServer

FAQ = {
    "faq-password": "To reset your password, open Settings > Account and click 'Reset password'. "
    "A reset link is emailed to you and stays valid for 30 minutes.",
    "faq-cancel": "Orders can be cancelled from the Orders page within 24 hours of purchase.",
    "faq-shipping": "Standard shipping takes 3 to 5 business days; express takes 1 day.",
}

QUESTIONS = [
    "How do I reset my password?",  # miss: the model answers
    "How can I reset my password?",  # paraphrase: semantic hit
    "How do I reset my password?",  # repeat: exact hit
    "How long does shipping take?",  # another question: miss
]


class HitPrinter(BaseEventHandler):
    """Prints every cache hit announced on LlamaIndex's dispatcher."""

    @classmethod
    def class_name(cls) -> str:
        return "HitPrinter"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, CacheHitEvent):
            score = f"{event.score:.3f}" if event.score is not None else "-"
            print(f"  [agent-cache] {event.layer} hit (score {score}) for {event.question!r}")


def model_id(base_url: str) -> str:
    """The first model the OpenAI-compatible server serves."""
    return str(httpx.get(f"{base_url}/models", timeout=10).json()["data"][0]["id"])


def main(llm_url: str | None = None) -> dict[str, Any]:
    """Run the demo; returns the cache's hit counts, model calls and answers."""
    with contextlib.ExitStack() as stack:
        if llm_url is None:
            llm_url = stack.enter_context(LocalLlamaServer(n_ctx=2048)).base_url
        path = stack.enter_context(tempfile.TemporaryDirectory())
        cache = stack.enter_context(LayeredCache(path=path))  # SQLite + Chroma + MiniLM

        Settings.llm = CachedLLM(
            llm=OpenAILike(
                api_base=llm_url,
                api_key="unused",
                model=model_id(llm_url),
                is_chat_model=True,
                context_window=2048,
                max_tokens=48,
                temperature=0.0,
            ),
            cache=cache,
        )
        Settings.embed_model = HuggingFaceEmbedding(model_name=resolve_model_path(DEFAULT_EMBEDDER))
        index = VectorStoreIndex([TextNode(id_=k, text=v) for k, v in FAQ.items()])
        post = StablePrefixPostprocessor()
        engine = index.as_query_engine(similarity_top_k=3, node_postprocessors=[post])

        printer = HitPrinter()
        dispatcher = get_dispatcher()
        dispatcher.add_event_handler(printer)
        answers: dict[str, str] = {}
        try:
            for question in QUESTIONS:
                started = time.perf_counter()
                answer = str(engine.query(question)).strip()
                answers.setdefault(question, answer)
                ms = (time.perf_counter() - started) * 1000
                print(f"{question!r} -> {answer[:70]!r} ({ms:.0f} ms)")

            streaming = index.as_query_engine(
                similarity_top_k=3, node_postprocessors=[post], streaming=True
            )
            deltas = list(streaming.query(QUESTIONS[0]).response_gen)
            print(f"streamed from the cache in {len(deltas)} deltas: {''.join(deltas)[:60]!r}")
        finally:
            dispatcher.event_handlers.remove(printer)

        stats = cache.stats()
        print(stats)
        return {
            **stats.hits,
            "model_calls": stats.misses,
            "answers": answers,
            "streamed": "".join(deltas),
            "stream_deltas": len(deltas),
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-url", help="an OpenAI-compatible base URL (default: start SmolLM2)")
    main(parser.parse_args().llm_url)
