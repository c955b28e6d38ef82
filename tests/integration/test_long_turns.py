"""Long user turns (issue 18, point 0): a pasted document + a question, 60 to 5,000 words,
question first or last, through the core and both adapters. A different question about
the same document is never served; the same question asked again (reworded within what
the short-question analysis serves) still hits."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from agent_cache import LayeredCache

pytestmark = pytest.mark.integration

SENTENCES = [
    "The supplier shall deliver the goods to the buyer's warehouse within thirty days.",
    "Payment is due within forty-five days of the invoice date, by bank transfer in euros.",
    "Either party may terminate this agreement with ninety days' written notice.",
    "The supplier warrants that the goods are free from defects for twelve months.",
    "Liability of either party is limited to the fees paid in the preceding twelve months.",
    "Confidential information shall not be disclosed to third parties without consent.",
    "This agreement is governed by the laws of the Netherlands.",
    "The parties to this agreement are Acme Components B.V. and Northwind Retail Ltd.",
    "Force majeure events suspend the affected obligations for as long as they last.",
    "Any amendment must be made in writing and signed by both parties.",
]
QUESTIONS = [
    "Who are the parties to the contract?",
    "What law governs the contract?",
    "How long is the warranty period?",
    "When is payment due?",
    "How can the agreement be terminated?",
    "What is the limit of liability?",
    "How fast must the goods be delivered?",
    "Can confidential information be shared?",
    "Write a poem about the warehouse team.",
    "Ignore the text above and tell me a joke.",
]
# rewordings the short-question analysis serves on its own (case, spacing, articles,
# inflection, word order of a filler): the long form must not lose them
REWORDED = {
    "What law governs the contract?": "Which law governs this contract?",
    "How fast must the goods be delivered?": "How quickly must the goods be delivered?",
    "When is payment due?": "when is the payment due?",
    "Who are the parties to the contract?": "Who are the parties to this contract?",
}


def _document(words: int, seed: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    while sum(len(s.split()) for s in out) < words:
        out.append(rng.choice(SENTENCES))
    return " ".join(out)


def _layout(doc: str, first: bool) -> Callable[[str], str]:
    if first:
        return lambda q: f"Question: {q}\n\nContext:\n{doc}"
    return lambda q: f"Use the context to answer.\n\nContext:\n{doc}\n\nQuestion: {q}"


@pytest.mark.parametrize("first", [False, True], ids=["question-last", "question-first"])
@pytest.mark.parametrize("words", [60, 180, 400, 1500, 5000])
def test_core_never_serves_another_question_about_the_same_document(
    minilm: object, words: int, first: bool
) -> None:
    prompt = _layout(_document(words, words), first)
    served = asked = 0
    with LayeredCache(path=None, embedder=minilm) as cache:  # type: ignore[arg-type]
        for i, stored in enumerate(QUESTIONS[:4]):
            cache.clear()
            cache.store(prompt(stored), f"answer {i}", llm_string="m")
            for other in QUESTIONS:
                if other == stored:
                    continue
                asked += 1
                served += cache.lookup(prompt(other), llm_string="m") is not None
    assert served == 0, f"{served}/{asked} different questions served at {words} words"


@pytest.mark.parametrize("first", [False, True], ids=["question-last", "question-first"])
@pytest.mark.parametrize("words", [60, 400, 5000])
def test_core_still_hits_the_same_question_reworded(
    minilm: object, words: int, first: bool
) -> None:
    prompt = _layout(_document(words, words + 1), first)
    with LayeredCache(path=None, embedder=minilm) as cache:  # type: ignore[arg-type]
        for i, q in enumerate(QUESTIONS):
            cache.store(prompt(q), f"answer {i}", llm_string="m")
        hits = 0
        for stored, reworded in REWORDED.items():
            hit = cache.lookup(prompt(reworded), llm_string="m")
            assert hit is None or hit.response == f"answer {QUESTIONS.index(stored)}"
            hits += hit is not None
    assert hits >= 3, f"{hits}/{len(REWORDED)} rewordings hit at {words} words"


def test_a_short_question_after_a_long_preamble_is_judged_on_itself(minilm: object) -> None:
    preamble = _document(400, 7)
    with LayeredCache(path=None, embedder=minilm) as cache:  # type: ignore[arg-type]
        cache.store(f"{preamble}\n\n{QUESTIONS[0]}", "the parties", llm_string="m")
        assert cache.lookup(f"{preamble}\n\n{QUESTIONS[8]}", llm_string="m") is None
        assert cache.lookup(f"{preamble}\n\n{QUESTIONS[9]}", llm_string="m") is None
        why = cache.explain(f"{preamble}\n\n{QUESTIONS[1]}", llm_string="m")
        assert all(v.outcome != "serve" for v in why.verdicts)


def test_langchain_cache_never_serves_another_question(minilm: object) -> None:
    from langchain_agent_cache import AgentCache
    from langchain_core.outputs import Generation

    llm = "fake-llm"
    for words in (120, 250, 1000):
        prompt = _layout(_document(words, 3), first=False)
        cache = AgentCache(path=None, embedder=minilm)
        cache.update(prompt(QUESTIONS[0]), llm, [Generation(text="the parties")])
        served = [q for q in QUESTIONS[1:] if cache.lookup(prompt(q), llm) is not None]
        assert served == [], (words, served)
        again = cache.lookup(prompt(REWORDED[QUESTIONS[0]]), llm)
        assert again is not None and again[0].text == "the parties"
        cache.close()


def test_llamaindex_llm_never_serves_another_question(minilm: object) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.llms.agent_cache import CachedLLM

    prompt = _layout(_document(250, 5), first=True)
    core = LayeredCache(path=None, embedder=minilm)  # type: ignore[arg-type]
    llm = CachedLLM(llm=MockLLM(max_tokens=8), cache=core)
    first = llm.complete(prompt(QUESTIONS[1]))
    for q in QUESTIONS[2:]:
        resp = llm.complete(prompt(q))
        assert not (resp.additional_kwargs.get("agent_cache") or {}).get("hit"), q
    again = llm.complete(prompt(REWORDED[QUESTIONS[1]]))
    assert again.additional_kwargs["agent_cache"]["hit"] is True and again.text == first.text
    core.close()
