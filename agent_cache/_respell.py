"""The text a vector search reads: a question with its misspelled words respelled.

MiniLM reads a misspelled word as other word pieces: "how do i cancle my subscrption" /
"How do I cancel my subscription?" score 0.35, so the stored question is never found,
and the difference analysis (which reads "cancle" as a typo of "cancel") never sees it.
A question with words the dictionary does not hold is therefore searched twice: as
written and respelled, each lower-case word of three letters or more that the dictionary
does not hold, vowels in it (not "pkg", "msg": short on purpose), replaced by the
likeliest dictionary word one edit away (a letter deleted, added, changed, or two
swapped). Each stored question counts at its better similarity. Stored questions are
embedded as written: a brand the dictionary lacks ("venmo", "wifi", "json") would be
respelled into another word ("venom", "wife", "son") and found by neither spelling.
The analysis reads a respelling only for a word it could not align as written, and only
when the respelled word then aligns with the other question ("purchse" / "buy": read
"purchase", a synonym); a respelling that lands on another word is refused there, not
served, and one that aligns nothing is not read at all.
"""

from __future__ import annotations

import functools
import math
import re
import string

from agent_cache.differences import _BARE_NOT, _TEXTING, _Dictionary

__all__ = ["MAX_CHARS", "respelled", "respelling"]

#: Texts longer than this are embedded as written (a pasted document: its names and
#: jargon are not typos, and respelling it would cost time on every call).
MAX_CHARS = 600
_WORD = re.compile(r"(?<![\w'’-])[a-z]{3,}(?![\w'’-])")
_LETTERS = string.ascii_lowercase


_VOWELS = frozenset("aeiouy")
# letters that spell one sound, so that writers swap them ("reduse", "proffesional")
_SOUNDS = frozenset(
    {frozenset(p) for p in ("cs", "ck", "sz", "iy", "kq", "gj", "ei", "ae", "ou", "uo")}
)


def _cost(a: str, b: str) -> float:
    """How unlikely a writer meaning ``a`` wrote ``b`` (one edit apart), in orders of
    magnitude: swapped or doubled letters are the commonest slips, then one vowel for
    another or letters of one sound, then a vowel left out or added, then the rest
    (after Kernighan, Church and Gale's counts of typing errors)."""
    if len(a) == len(b):
        at = [i for i in range(len(a)) if a[i] != b[i]]
        if len(at) == 2:
            return 1.0  # two letters swapped
        x, y = a[at[0]], b[at[0]]
        if (x in _VOWELS and y in _VOWELS) or frozenset((x, y)) in _SOUNDS:
            return 2.0
        return 5.0
    long_, short = (a, b) if len(a) > len(b) else (b, a)
    i = next((k for k in range(len(short)) if long_[k] != short[k]), len(short))
    ch = long_[i]
    if (i and long_[i - 1] == ch) or (i + 1 < len(long_) and long_[i + 1] == ch):
        return 1.0  # a doubled letter written once, or one letter written twice
    return 3.0 if ch in _VOWELS else 4.0


def _unknown(word: str) -> bool:
    """Not a dictionary word, and vowels in it (a word without any is written short on
    purpose: "pkg", "msg")."""
    return _Dictionary.frequency(word) == 0 and bool(_VOWELS & set(word))


@functools.lru_cache(maxsize=4096)
def _edits(word: str) -> frozenset[str]:
    """Every string one edit from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + ch + b[1:] for a, b in splits if b for ch in _LETTERS}
    edits |= {a + ch + b for a, b in splits for ch in _LETTERS}
    return frozenset(edits)


@functools.lru_cache(maxsize=16384)
def _respelling(word: str) -> str | None:
    """The likeliest dictionary word one edit from ``word`` (its frequency against the
    edit's :func:`_cost`); None when ``word`` is a dictionary word or none is one edit
    away."""
    if not _unknown(word):
        return None
    best, score = None, float("-inf")
    for e in sorted(_edits(word)):  # sorted: one answer on a tie, on every machine
        f = _Dictionary.frequency(e)
        if f <= 0 or len(e) < 3 or e == word:
            continue
        s = math.log10(f) - _cost(e, word)
        if s > score:
            best, score = e, s
    return best


def _shortens(word: str, other: str) -> bool:
    """``word`` is ``other``, or its letters in order from the same first letter: "auth"
    for "authentication", "dev" for "development" (the analysis matches those)."""
    if word == other:
        return True
    if word[0] != other[0] or len(word) >= len(other):
        return False
    rest = iter(other[1:])
    return all(ch in rest for ch in word[1:])


def _written_so(word: str) -> bool:
    """A form the analysis reads as written: chat shorthand ("ur", "tmrw") or a "n't"
    typed without its apostrophe ("doesnt", "isnt")."""
    return word in _TEXTING or (word.endswith("nt") and word[:-2] in _BARE_NOT)


def _initials_in(word: str, near: str) -> bool:
    """``word`` spelled by the initials of consecutive words of ``near`` (small words
    left out): "pto" in "... paid time off ...", "eta" in "estimated time of arrival"."""
    initials = "".join(w[0] for w in re.findall(r"[A-Za-z]+", near.lower()) if len(w) > 3)
    full = "".join(w[0] for w in re.findall(r"[A-Za-z]+", near.lower()))
    return len(word) >= 3 and (word in initials or word in full)


def respelled(text: str, near: str = "") -> str | None:
    """``text`` with its misspelled lower-case words respelled; None when none is (or the
    text is longer than :data:`MAX_CHARS`). With ``near`` (the stored question it is
    compared with), a word written as one of ``near``'s or short for one (:func:`_shortens`)
    stays, and a word of ``near`` one edit away is the respelling first: "ater" against
    "... before the deadline" is "after", "rset" against "reset my password" stays."""
    if len(text) > MAX_CHARS:
        return None
    changed = False
    theirs = words_of(near)

    def fix(m: re.Match[str]) -> str:
        nonlocal changed
        better = respelling(m.group(0), near, theirs)
        if better is None:
            return m.group(0)
        changed = True
        return better

    out = _WORD.sub(fix, text)
    return out if changed else None


def words_of(near: str) -> frozenset[str]:
    """``near``'s words of three letters or more, lower-cased, and its hyphenated words
    joined ("wifi" against "Wi-Fi", "email" against "e-mail": written so)."""
    theirs = {w.lower() for w in re.findall(r"[A-Za-z]{3,}", near)}
    if "-" in near:
        joined = re.findall(r"[A-Za-z]+(?:-[A-Za-z]+)+", near)
        theirs |= {w.replace("-", "").lower() for w in joined}
    return frozenset(theirs)


def respelling(word: str, near: str = "", theirs: frozenset[str] | None = None) -> str | None:
    """The respelling of one lower-case ``word`` as :func:`respelled` reads it against
    ``near`` (``theirs``: :func:`words_of` ``near``, when the caller has it already);
    None when it stays as written."""
    if theirs is None:
        theirs = words_of(near)
    if not _unknown(word) or any(_shortens(word, w) for w in theirs):
        return None  # spelled right, the stored question's word, or short for one
    if _written_so(word) or (near and _initials_in(word, near)):
        return None  # shorthand, or an acronym of the stored question's words
    close = sorted(_edits(word) & theirs)
    return close[0] if close else _respelling(word)
