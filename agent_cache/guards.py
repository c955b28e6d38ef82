"""Cheap guards run before the reranker: refuse a candidate that cannot be the same question.

Embeddings place "order 12345" next to "order 12346", "can I" next to "can't I", "flights
to Boston" next to "flights to Denver" and "cancel an order" next to "create an order"; a
wrong hit is worse than a miss, so a candidate is refused outright, before any model-based
verification, when the two texts differ in

- numbers (``numbers``),
- negation (``negation``),
- named entities: capitalized words not at the start of a sentence, and acronyms, must
  appear (in any case) in the other text (``entities``),
- a pair of opposites: one text has a word whose opposite only the other has
  (``opposites``: cancel/create, buy/sell, before/after, high/low, ...),
- and, in case-sensitive namespaces (code), letter case (``case``).

Guards take the texts as the user wrote them (case matters for entities).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["GuardResult", "check_guards", "entities", "negated", "numbers"]

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(
    r"\b(not|no|never|none|nobody|nothing|neither|nor|without|cannot|can't|won't|don't|"
    r"doesn't|didn't|isn't|aren't|wasn't|weren't|shouldn't|wouldn't|couldn't|mustn't|"
    r"haven't|hasn't|hadn't|n't)\b|n't\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_](?:[\w&.'’-]*\w)?")
_SENTENCE = re.compile(r"(?<=[.?!:;])\s+|\n+")
_NOT_ENTITIES = frozenset({"i", "i'm", "i've", "i'd", "i'll", "ok", "okay"})

_OPPOSITE_PAIRS = (
    ("cancel", "create"),
    ("cancel", "place"),
    ("cancel", "book"),
    ("buy", "sell"),
    ("buying", "selling"),
    ("before", "after"),
    ("high", "low"),
    ("higher", "lower"),
    ("increase", "decrease"),
    ("enable", "disable"),
    ("start", "stop"),
    ("open", "close"),
    ("add", "remove"),
    ("upgrade", "downgrade"),
    ("import", "export"),
    ("login", "logout"),
    ("max", "min"),
    ("maximum", "minimum"),
    ("first", "last"),
    ("best", "worst"),
    ("man", "woman"),
    ("men", "women"),
    ("male", "female"),
    ("boy", "girl"),
    ("husband", "wife"),
    ("input", "output"),
    ("positive", "negative"),
    ("win", "lose"),
    ("pros", "cons"),
    ("advantages", "disadvantages"),
    ("encrypt", "decrypt"),
    ("encode", "decode"),
    ("download", "upload"),
    ("send", "receive"),
    ("lend", "borrow"),
    ("rich", "poor"),
    ("cheap", "expensive"),
    ("cheapest", "most expensive"),
    ("fast", "slow"),
    ("faster", "slower"),
    ("hot", "cold"),
    ("true", "false"),
    ("legal", "illegal"),
    ("possible", "impossible"),
    ("allowed", "forbidden"),
    ("subscribe", "unsubscribe"),
    ("install", "uninstall"),
    ("lock", "unlock"),
    ("gain", "lose"),
    ("past", "future"),
    ("north", "south"),
    ("east", "west"),
)
_OPPOSITES: dict[str, frozenset[str]] = {}
for _a, _b in _OPPOSITE_PAIRS:
    _OPPOSITES[_a] = _OPPOSITES.get(_a, frozenset()) | {_b}
    _OPPOSITES[_b] = _OPPOSITES.get(_b, frozenset()) | {_a}


def _fold(word: str) -> str:
    word = unicodedata.normalize("NFKC", word).replace("’", "'").casefold()
    return word[:-2] if word.endswith("'s") else word.rstrip(".'")


def numbers(text: str) -> frozenset[str]:
    """The numbers in ``text``, with thousands separators dropped.

    Example:
        >>> sorted(numbers("order 12,345 costs 9.50"))
        ['12345', '9.50']
    """
    out = set()
    for m in _NUMBER.finditer(text):
        out.add(re.sub(r",(?=\d{3}\b)", "", m.group(0)))
    return frozenset(out)


def negated(text: str) -> bool:
    """Whether the text contains a negation marker (not, never, can't, ...)."""
    return _NEGATION.search(text.replace("’", "'")) is not None


def _words(text: str) -> set[str]:
    return {_fold(w) for w in _WORD.findall(text)}


def entities(text: str) -> frozenset[str]:
    """Capitalized words not opening a sentence, and acronyms, case-folded.

    Example:
        >>> sorted(entities("How do I fly from Boston to NYC? Tell me."))
        ['boston', 'nyc']
    """
    out = set()
    for sentence in _SENTENCE.split(text.strip()):
        words = _WORD.findall(sentence)
        for i, w in enumerate(words):
            acronym = len(w) > 1 and sum(c.isupper() for c in w) >= 2
            if (i > 0 and w[0].isupper()) or acronym:
                folded = _fold(w)
                if folded and folded not in _NOT_ENTITIES:
                    out.add(folded)
    return frozenset(out)


def _opposed(q_words: set[str], c_words: set[str]) -> bool:
    for w in q_words - c_words:
        if _OPPOSITES.get(w, frozenset()) & (c_words - q_words):
            return True
    return False


class GuardResult(str):
    """The name of the guard that refused, or ``""`` when all passed (falsy)."""


def check_guards(query: str, candidate: str, *, case_sensitive: bool = False) -> GuardResult:
    """Return ``""`` if the candidate may be served for the query, else the refusing guard.

    With ``case_sensitive`` (code namespaces), texts that differ only in case are refused:
    embedding models are mostly uncased, and ``print(X)`` is not ``print(x)``.

    Example:
        >>> check_guards("status of order 12345", "status of order 12346")
        'numbers'
        >>> check_guards("can I cancel", "can't I cancel")
        'negation'
        >>> check_guards("Flights to Boston?", "Flights to Denver?")
        'entities'
        >>> check_guards("How do I cancel an order?", "How do I create an order?")
        'opposites'
    """
    if case_sensitive:
        q, c = " ".join(query.split()), " ".join(candidate.split())
        if q != c and q.casefold() == c.casefold():
            return GuardResult("case")
    if numbers(query) != numbers(candidate):
        return GuardResult("numbers")
    if negated(query) != negated(candidate):
        return GuardResult("negation")
    q_words, c_words = _words(query), _words(candidate)
    if any(e not in c_words for e in entities(query)) or any(
        e not in q_words for e in entities(candidate)
    ):
        return GuardResult("entities")
    if _opposed(q_words, c_words):
        return GuardResult("opposites")
    return GuardResult("")
