"""Words that crossed between two questions: the crossing alignments of the analysis.

Two questions that hold the same words in another order ask something else when words
traded places inside one clause ("from the annual plan to the monthly plan" / "from the
monthly plan to the annual plan", "87 octane in a car that requires 91" / "91 octane ...
requires 87", "Am I covered under my wife's plan?" / "Is my wife covered under my
plan?"), and the same thing when a whole clause or a detachable phrase moved ("When I
sell at a loss, can I deduct it?" / "Can I deduct it when I sell at a loss?", "Using
git, how do I ..." / "How do I ... using git?").

This module works on key sequences (a key a word, one key for two aligned words; the
analysis builds them, :class:`Side`) and finds the pairs of keys whose order differs
(inversions), leaving out those a clause move or a moved phrase explains. No word list
decides which words matter: every content word, number, time and person does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Side", "detached", "inversions"]

#: The label of a clause that opens the sentence (or follows a full stop) and of one
#: after a comma with no subordinator: the main clause.
MAIN = "main"
#: A fronted clause with no subordinator ("My package hasn't arrived, what should I
#: do?"): it may stand for any subordinate clause of the other side ("... if my package
#: hasn't arrived").
FRONTED = "fronted"


@dataclass
class Side:
    """One question as the crossing check sees it.

    Attributes:
        keys: one key a word (aligned words share theirs).
        marks: whether a phrase mark (a comma, a full stop) comes before each key.
        opens: whether each key's word may open a detachable phrase (a function word,
            a time, an -ing form: "on Android", "tomorrow", "using git").
        modifier: whether each key's word reads only as an adjective or adverb.
        clause: the label of the clause each key stands in: :data:`MAIN`,
            :data:`FRONTED` or the subordinator that opened it ("if", "when").
        number: the index of that clause, counted from 0.
        prep: whether each key's word is a preposition that opens an adjunct ("in the
            USA", "on a J2 visa"): adjuncts next to each other may trade places.
    """

    keys: list[str]
    marks: list[bool]
    opens: list[bool]
    modifier: list[bool]
    clause: list[str]
    number: list[int]
    prep: list[bool] = field(default_factory=list)


def clauses(
    marks: Sequence[bool], subordinator: Sequence[str | None]
) -> tuple[list[str], list[int]]:
    """Clause labels and indices: a clause starts after a phrase mark or at a
    subordinator; one that opens the sentence and ends at a comma without a
    subordinator is :data:`FRONTED`.

    Example:
        >>> clauses([True, False, True, False], [None, None, None, None])
        (['fronted', 'fronted', 'main', 'main'], [0, 0, 1, 1])
        >>> clauses([True, False, False, False], [None, None, "if", None])
        (['main', 'main', 'if', 'if'], [0, 0, 1, 1])
    """
    labels: list[str] = []
    numbers: list[int] = []
    n = -1
    for i, (mark, sub) in enumerate(zip(marks, subordinator, strict=True)):
        if i == 0 or mark or sub:
            n += 1
            label = sub or MAIN
        labels.append(label)
        numbers.append(n)
    if numbers and numbers[-1] > 0 and labels[0] == MAIN:
        ends_at_mark = next(i for i, k in enumerate(numbers) if k == 1)
        if marks[ends_at_mark]:
            labels[:ends_at_mark] = [FRONTED] * ends_at_mark
    return labels, numbers


def _edge(side: Side, a: int, b: int) -> bool:
    """A span at a phrase boundary: the start or the end, beside a phrase mark, or an
    adjunct followed by another ("a job *in the USA* on a visa")."""
    if a == 0 or side.marks[a] or b == len(side.keys) or side.marks[b]:
        return True
    return bool(side.prep) and side.prep[a] and side.prep[b]


def _phrases(side: Side) -> list[tuple[int, int]]:
    """Spans that may be detachable phrases: from a word that opens one, standing at the
    start or after a mark, to the next mark or the end; or from such a word anywhere to
    the end or a mark (a trailing phrase: "... using my student ID")."""
    n = len(side.keys)
    out = []
    for a in range(n):
        if not side.opens[a]:
            continue
        b = next((k for k in range(a + 1, n) if side.marks[k]), n)
        out.append((a, b))
        if side.prep and side.prep[a]:  # an adjunct: to the next one
            b = next((k for k in range(a + 1, n) if side.marks[k] or side.prep[k]), n)
            out.append((a, b))
    return out


def detached(q: Side, c: Side) -> set[str]:
    """Keys of phrases that moved whole, the same words in the same order, from one
    phrase boundary to another, opening with a function word, a time or an -ing form:
    they moved freely ("Using git, how do I X?" / "How do I X using git?", "If my flight
    is late, am I owed money in the EU?" / "In the EU, am I owed money if my flight is
    late?").

    Example:
        >>> def side(words, marks):
        ...     n = len(words)
        ...     return Side(words, marks, [w == "using" for w in words],
        ...                 [False] * n, ["main"] * n, [0] * n)
        >>> q = side("using git how rename branch".split(), [True, False, True, False, False])
        >>> c = side("how rename branch using git".split(), [True, False, False, False, False])
        >>> sorted(detached(q, c))
        ['git', 'using']
    """
    free: set[str] = set()
    for one, other in ((q, c), (c, q)):
        for a, b in _phrases(one):
            if not _edge(one, a, b):
                continue
            words = one.keys[a:b]
            before = one.keys[a - 1] if a else None
            for x in range(len(other.keys) - len(words) + 1):
                y = x + len(words)
                if other.keys[x:y] != words or not _edge(other, x, y):
                    continue
                if not _same_kind(one.clause[a], other.clause[x]) and {
                    one.clause[a],
                    other.clause[x],
                } != {FRONTED, MAIN}:
                    continue  # from an "if" clause into the main one: another question
                if (other.keys[x - 1] if x else None) != before:
                    free.update(words)
    return free


def inversions(
    q: Side, c: Side, meaningful: frozenset[str], free: frozenset[str]
) -> list[tuple[str, str]]:
    """Pairs of meaningful keys, each said once on each side, in one order in the query
    and the other in the candidate, that no clause move explains. Left out: keys in
    ``free``; a modifier crossing a word that is not one ("learn Japanese fast" /
    "quickest way to learn Japanese"); two keys in different clauses on both sides whose
    clauses are of the same kind on both sides (a clause moved whole).

    Example:
        >>> def side(words):
        ...     n = len(words)
        ...     return Side(words, [i == 0 for i in range(n)], [False] * n, [False] * n,
        ...                 ["main"] * n, [0] * n)
        >>> inversions(side("convert pdf word".split()), side("convert word pdf".split()),
        ...            frozenset({"convert", "pdf", "word"}), frozenset())
        [('pdf', 'word')]
    """
    once_q, once_c = Counter(q.keys), Counter(c.keys)
    at_c = {k: j for j, k in enumerate(c.keys) if once_c[k] == 1}
    common = [
        (i, at_c[k])
        for i, k in enumerate(q.keys)
        if once_q[k] == 1 and k in at_c and k in meaningful and k not in free
    ]
    out = []
    for n, (i1, j1) in enumerate(common):
        for i2, j2 in common[n + 1 :]:
            if j1 < j2:
                continue
            if (q.modifier[i1] or c.modifier[j1]) != (q.modifier[i2] or c.modifier[j2]):
                continue
            apart = q.number[i1] != q.number[i2] and c.number[j1] != c.number[j2]
            if (
                apart
                and _same_kind(q.clause[i1], c.clause[j1])
                and _same_kind(q.clause[i2], c.clause[j2])
            ):
                continue
            out.append((q.keys[i1], q.keys[i2]))
    return out


def _same_kind(a: str, b: str) -> bool:
    return a == b or (FRONTED in (a, b) and MAIN not in (a, b))
