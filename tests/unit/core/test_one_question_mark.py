"""A question typed with no question mark, or with several (issue 18). Applied to the
hitting pairs of our suites, dropping the final mark kept 381 of 391 and "???" / "?!"
kept 440 of 451: the embedder reads the marks, and most stored questions end with one
("is it safe for dogs to eat grapes" / "Can dogs eat grapes?" scored 0.913, under the
0.92 threshold; with the mark the pair hits). The semantic layer now embeds a question
as asked with one mark, stored and looked up alike (a statement or request keeps its
own ending, a long RAG turn is embedded as written). Kept now 391 of 391 and 451 of 451,
lower case 408 -> 418 of 424; no trap newly served of ~750."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from agent_cache import LayeredCache
from agent_cache._request import asked_once, embedded_text
from agent_cache.testing import HashEmbedder


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("Can dogs eat grapes", "Can dogs eat grapes?"),
        ("how do i reset my password ", "how do i reset my password?"),
        ("Why??", "Why?"),
        ("Why is my fan so loud?!", "Why is my fan so loud?"),
        ("Is it open on Sundays ???", "Is it open on Sundays?"),
        ("Reset my password!!?", "Reset my password?"),  # typed as a question
        ("Can dogs eat grapes?", None),  # one mark already
        ("Where do I find my acct no.?", None),  # "no." is an abbreviation, not an ending
        ("Where do I find my acct no.??", "Where do I find my acct no.?"),
        ("Reset my password.", None),  # a request keeps its ending
        ("recommend a good beginner guitar", None),  # no question word or auxiliary first
        ("Is it safe.", None),  # ended as a statement
        ("", None),
        ("???", None),
        ("what is " + "x " * 300, None),  # a long turn: embedded as written
    ],
)
def test_asked_once(text: str, asked: str | None) -> None:
    assert asked_once(text) == asked
    assert embedded_text(text) == (asked or text)


class _Recording(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.seen.extend(texts)
        return super().embed(texts)


def test_stored_and_looked_up_questions_are_embedded_alike() -> None:
    embedder = _Recording()
    with LayeredCache(path=None, embedder=embedder) as cache:
        cache.store("How do I renew my passport", "online")
        assert embedder.seen == ["How do I renew my passport?"]
        cache.store_many([("How do I renew my visa!?", "in person")])
        assert embedder.seen[-1] == "How do I renew my visa?"
        embedder.seen.clear()
        hit = cache.lookup("how do I renew my passport??")
        assert embedder.seen[:1] == ["how do I renew my passport?"]
        assert hit is not None and hit.response == "online"
        # the exact layer keeps the text as typed: only the embedding reads one mark
        again = cache.lookup("How do I renew my passport")
        assert again is not None and again.layer == "exact"


def test_a_question_typed_without_its_mark_hits(check_lookups: Callable[..., None]) -> None:
    check_lookups(
        [("is it safe for dogs to eat grapes", "Can dogs eat grapes?")],
        [("Why is my cat gaining weight", "Why is my cat losing weight?")],
    )
