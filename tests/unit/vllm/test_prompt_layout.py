"""StablePrompt: segment order, stable documents, append-only history, debug linting."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import pytest

from agent_cache.errors import ConfigurationError
from agent_cache.prompt import PopularityOrderer, PrefixVolatilityWarning, StablePrompt

DOCS = [
    {"id": "d2", "content": "Refunds take five days."},
    {"id": "d1", "content": "Orders ship from Lyon."},
    {"id": "d3", "content": "Support answers in English."},
]


def make(**kwargs: object) -> StablePrompt:
    return StablePrompt(
        "You are the support assistant.",
        knowledge="Company: ACME.",
        instructions="Answer in one sentence.",
        **kwargs,  # type: ignore[arg-type]
    )


def test_segments_run_from_stable_to_volatile() -> None:
    text = make().to_text("How long do refunds take?", DOCS)
    positions = [
        text.index(s)
        for s in (
            "You are the support assistant.",
            "Company: ACME.",
            "Orders ship from Lyon.",
            "Answer in one sentence.",
            "How long do refunds take?",
        )
    ]
    assert positions == sorted(positions)


def test_messages_put_the_stable_parts_in_the_system_message() -> None:
    msgs = make().to_messages("Q?", DOCS)
    assert msgs[0] == {
        "role": "system",
        "content": "You are the support assistant.\n\nCompany: ACME.",
    }
    assert msgs[-1]["role"] == "user"
    assert msgs[-1]["content"].endswith("Answer in one sentence.\n\nQ?")


def test_retrieval_order_does_not_change_the_prompt() -> None:
    p = make()
    a = p.to_messages("Q?", DOCS)
    b = p.to_messages("Q?", [*list(reversed(DOCS)), DOCS[0]])  # reordered, with a duplicate
    assert a == b
    content = a[-1]["content"]
    assert (
        content.index("[1] Orders ship")
        < content.index("[2] Refunds")
        < content.index("[3] Support")
    )


def test_given_order_and_popularity_order() -> None:
    given = make(doc_order="given").to_text("Q?", DOCS)
    assert given.index("Refunds") < given.index("Orders")
    orderer = PopularityOrderer(min_lead=0)
    for _ in range(3):
        orderer.order([DOCS[2]])
    popular = make(doc_order=orderer).to_text("Q?", DOCS)
    assert popular.index("[1] Support") < popular.index("Orders")
    with pytest.raises(ConfigurationError):
        make(doc_order="random")


def test_relevance_hint_names_the_retrieval_order_after_the_documents() -> None:
    text = make(relevance_hint=True).to_text("Q?", DOCS)
    # canonical numbering: d1=1, d2=2, d3=3; retrieval order was d2, d1, d3
    assert "Most relevant first: 2, 1, 3" in text
    assert text.index("Most relevant first") > text.index("[3] Support")


def turns(n: int) -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(n)
    ]


def test_history_folds_in_whole_windows() -> None:
    p = make(window=6)
    counts = []
    for i, m in enumerate(turns(19), 1):
        p.add_turn(m["role"], m["content"])
        counts.append((i, p.folded_count()))
    assert dict(counts)[6] == 0
    assert dict(counts)[7] == 6
    assert dict(counts)[12] == 6
    assert dict(counts)[13] == 12
    assert dict(counts)[19] == 18
    recent = p.to_messages("Q?")[1:-1]
    assert [m["content"] for m in recent] == ["turn 18"]


def test_between_window_boundaries_the_prefix_only_grows() -> None:
    p = make(window=6)
    p.extend(turns(7))
    before = p.prefix_messages()
    for m in turns(12)[7:]:
        p.add_turn(m["role"], m["content"])
        after = p.prefix_messages()
        assert after[: len(before)] == before  # append-only: the old prefix is untouched
        before = after
    p.add_turn("user", "turn 12")  # the 13th turn crosses a boundary: the summary changes
    assert p.prefix_messages()[0] != before[0]


def test_the_summarizer_runs_once_per_boundary() -> None:
    calls: list[int] = []

    def summarize(messages: Sequence[Mapping[str, str]]) -> str:
        calls.append(len(messages))
        return f"{len(messages)} turns about refunds"

    p = make(window=2, summarizer=summarize)
    for m in turns(6):
        p.add_turn(m["role"], m["content"])
        p.to_messages("Q?")
        p.to_messages("Q again?")
    assert calls == [2, 4]
    assert (
        "Summary of the earlier conversation:\n4 turns about refunds"
        in p.prefix_messages()[0]["content"]
    )


def test_default_summary_is_deterministic_and_short() -> None:
    p = make(window=1)
    p.add_turn("user", "x" * 500)
    p.add_turn("assistant", "ok")
    summary = p.summary()
    assert summary.startswith("user: xxx") and len(summary) < 260
    assert p.summary() == summary


def test_bad_turns_and_window() -> None:
    with pytest.raises(ConfigurationError):
        make(window=0)
    with pytest.raises(ConfigurationError):
        make().add_turn("narrator", "hi")


def test_debug_mode_warns_about_volatile_static_content(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(PrefixVolatilityWarning, match="system:1:10: date '2024-05-01'"):
        StablePrompt("Today is 2024-05-01.", debug=True)
    monkeypatch.setenv("AGENT_CACHE_DEBUG", "1")
    with pytest.warns(PrefixVolatilityWarning, match="uuid"):
        StablePrompt("ok", knowledge="session 550e8400-e29b-41d4-a716-446655440000")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StablePrompt("You are helpful.")  # clean: no warning
        StablePrompt("Today is 2024-05-01.", debug=False)
