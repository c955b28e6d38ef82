"""The grammar-generated trap suite (issue 18, point 5): question frames x slot values x
perturbations, not hand-written sentences. Shared by ``tests/integration/
test_trap_grammar.py`` and ``agent-cache bench semantic``.

Traps change one thing that changes the answer (a modal, a temporal relation, a
quantifier, a reversing prefix, a number, a negation); paraphrases change only the
surface (capitals, a filler, an article, spacing, "please").
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

__all__ = ["FRAMES", "PARAPHRASES", "pairs"]

SUBJECTS = ["my dog", "a guest", "my laptop", "the contractor", "my child", "a bike"]
PLACES = ["the office", "the hotel", "the flight", "the gym", "the library", "the clinic"]
ACTIONS = ["bring", "take", "leave", "register", "park", "keep"]

# (frame, trap substitution) — each frame is one question shape with a slot that flips
FRAMES = [
    ("modality", "Can I {a} {s} to {p}?", "Do I have to {a} {s} to {p}?"),
    ("modality", "Should I {a} {s} at {p}?", "Must I {a} {s} at {p}?"),
    ("modality", "Will {p} let me {a} {s}?", "Could {p} let me {a} {s}?"),
    (
        "relation",
        "Can I {a} {s} before the meeting at {p}?",
        "Can I {a} {s} after the meeting at {p}?",
    ),
    (
        "relation",
        "What should I do with {s} during the stay at {p}?",
        "What should I do with {s} after the stay at {p}?",
    ),
    ("scope", "Do all rooms at {p} allow {s}?", "Do some rooms at {p} allow {s}?"),
    (
        "scope",
        "Is every visitor at {p} allowed to {a} {s}?",
        "Is one visitor at {p} allowed to {a} {s}?",
    ),
    ("numbers", "Can I {a} 2 bags and {s} to {p}?", "Can I {a} 3 bags and {s} to {p}?"),
    ("negation", "Is it allowed to {a} {s} at {p}?", "Is it not allowed to {a} {s} at {p}?"),
    ("reversal", "How do I onboard {s} at {p}?", "How do I offboard {s} at {p}?"),
    ("reversal", "Can my spouse {a} {s} to {p}?", "Can my former spouse {a} {s} to {p}?"),
]
# surface-only rewrites of the first form
PARAPHRASES: dict[str, Callable[[str], str]] = {
    "capitals": lambda q: q.upper(),
    "filler": lambda q: "Quick question: " + q[0].lower() + q[1:],
    "please": lambda q: q[:-1] + ", please?",
    "spacing": lambda q: q.replace(" ", "  ", 2),
    "article": lambda q: (
        q.replace(" the ", " this ", 1) if " the " in q else q.replace(" a ", " one ", 1)
    ),
}


def pairs(seed: int = 18) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """(traps, paraphrases): each a list of (kind, stored, asked)."""
    rng = random.Random(seed)
    slots = list(itertools.product(ACTIONS, SUBJECTS, PLACES))
    rng.shuffle(slots)
    traps: list[tuple[str, str, str]] = []
    paraphrases: list[tuple[str, str, str]] = []
    for i, (kind, base, trap) in enumerate(FRAMES):
        for a, s, p in slots[i * 4 : i * 4 + 4]:
            q = base.format(a=a, s=s, p=p)
            traps.append((kind, q, trap.format(a=a, s=s, p=p)))
            name = list(PARAPHRASES)[len(paraphrases) % len(PARAPHRASES)]
            paraphrases.append((name, q, PARAPHRASES[name](q)))
    return traps, paraphrases
