"""Core quickstart: exact, template and semantic hits, guards, invalidation, stats.

Runs offline on the embedded default (SQLite + Chroma persistent + the bundled MiniLM);
a toy function stands in for the model. Run: ``python examples/core_quickstart.py``.
"""

from __future__ import annotations

import tempfile

from agent_cache import LayeredCache

CALLS: list[str] = []


def fake_llm(question: str) -> dict[str, str]:
    CALLS.append(question)
    return {"text": f"(model answer to: {question})"}


def main() -> dict[str, int]:
    with tempfile.TemporaryDirectory() as path, LayeredCache(
        path=path, templates={"order_status": ["status of order {id}", "where is order {id}"]}
    ) as cache:
        questions = [
            "How do I reset my password?",
            "how do i reset my   password?",  # exact after normalization
            "How can I reset my password?",  # paraphrase: semantic
            "Status of order 12345",
            "Where is order 12345?",  # same template, same parameters
            "Status of order 12346",  # different order: never shares an answer
        ]
        for q in questions:
            cache.get_or_compute(q, lambda q=q: fake_llm(q), llm_string="demo-model",
                                 tags=["faq"])
        hit = cache.lookup("How can I reset my password?", llm_string="demo-model")
        print(f"served from {hit.layer if hit else None} (score {hit.score if hit else None})")
        print(cache.stats())
        removed = cache.invalidate(tags=["faq"])
        print(f"invalidated {removed} entries tagged 'faq'")
        return {"model_calls": len(CALLS), "removed": removed, **cache.stats().hits}


if __name__ == "__main__":
    main()
