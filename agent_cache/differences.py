"""What differs between a question and a stored question, and whether it changes the answer.

Embeddings put "sort in ascending order" next to "sort in descending order", "weather in
Paris today" next to "... tomorrow" and "Is Madrid bigger than Rome?" next to "Is Rome
bigger than Madrid?". Instead of a list of forbidden word pairs, :func:`analyze` aligns the
two questions and looks at what is left over:

1. Both texts are tokenized (contractions expanded, number words read as numbers, glued
   units split off), multi-word synonyms are merged (``turn on`` ≈ ``enable``) and
   acronyms are matched against the words whose initials they spell (``2FA`` ≈
   ``two-factor authentication``).
2. Closed classes are compared as wholes: numbers with their units and versions
   (``numbers``), temporal expressions (``temporal``: today/tomorrow, weekdays, months,
   seasons, quarters, this/next/last + unit, years), negation (``negation``), the asking
   word why/when/where/who (``question``; a yes/no question against one that opens with
   why/when/where/who too) and, in case-sensitive namespaces, letter case.
3. Content words are matched by lemma (``signs`` = ``sign``, ``bigger`` = ``big``), by
   synonym group, and as typos (an edit of one or two letters where one side is not a
   dictionary word, or far rarer than the other).
4. What stays unmatched is classified: an opposite (a lexicon, plus morphological
   opposites found by rule: ``un-/in-/dis-/de-/non-`` prefixes, a swapped prefix over one
   stem as in *as*cending/*des*cending or *im*port/*ex*port, ``-ful``/``-less``,
   ``-er``/``-ee``), a named entity, an audience or role qualifier (admin/guest,
   children/adults, business/economy, "for beginners"), a direction (``to`` against
   ``from``, ``up`` against ``down``, or one word reached from opposite directions; ``to``
   against ``into`` or ``with`` is a rewording), or, when
   the rest of the two questions is the same, an unexplained *substitution* of one
   content word for another (``cancel`` vs ``track`` my order) — refused although no
   list names the pair.
5. Shared words whose order is swapped around a fixed pivot (``X than Y``, ``from X to
   Y``, ``X beat Y``) are refused (``order``); swaps around a symmetric connector
   (``X or Y``, ``X vs Y``, ``between X and Y``) are not.

The result is an :class:`Analysis`: a refusal reason (or none), every difference found,
and whether the two texts are *equivalent* (every difference explained away as filler,
inflection, a synonym or a typo), in which case the semantic layer may serve them at a
lower similarity than its threshold.

Example:
    >>> analyze("Is Madrid bigger than Rome?", "Is Rome bigger than Madrid?").reason
    'order'
    >>> analyze("How do I turn on 2FA?", "How do I enable two-factor authentication?").equivalent
    True
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_cache import _moves
from agent_cache import lexicon as lx
from agent_cache._frames import (
    MODAL_PREDICATES,
    ONCE_SUBJECTS,
    QUANTIFIERS,
    STEP_NOUNS,
    frame_differences,
)

__all__ = ["REASONS", "Analysis", "Difference", "analyze", "shared_ends"]

#: Every refusal reason :func:`analyze` can give, in the order they are checked.
REASONS = (
    "case",
    "numbers",
    "temporal",
    "relation",
    "negation",
    "question",
    "request",
    "modality",
    "scope",
    "opposites",
    "qualifier",
    "entities",
    "audience",
    "direction",
    "order",
    "substitution",
    "length",
)

#: The most characters of each text :func:`analyze` judges word by word (its alignment
#: is quadratic in them: 4,000 against 4,000 takes ~0.15 s). Longer texts are compared
#: whole, in linear time: the part both share at the start and at the end is equal by
#: construction, and only the region where they differ, with ``_WINDOW_CONTEXT``
#: characters of shared text around it, is analyzed. When that region is still longer
#: than this on either side, the candidate is refused (``length``): a wrong hit is
#: worse than a miss. Raise it, or analyze long texts by parts, to serve more of them.
MAX_ANALYZED_CHARS = 4_000
_WINDOW_CONTEXT = 400

_TOKEN = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|!=|==|<=|>=|<>|[=<>]|[$€£¥₹%&/]|[^\W_](?:[\w'.+#-]*[^\W_])?(?:\+\+|#)?",
)
# comparison operators read as words, so that "!=" negates and "<" opposes ">"
_OPERATORS = {
    "!=": ("not", "equal"),
    "<>": ("not", "equal"),
    "==": ("equal",),
    "=": ("equal",),
    "<": ("less",),
    ">": ("greater",),
    "<=": ("less", "equal"),
    ">=": ("greater", "equal"),
}
_PURE_NUMBER = re.compile(r"^\d+(?:[.,:]\d+)*$")
_GLUED = re.compile(r"^(\d+(?:\.\d+)?)([a-z%°]+)$")
_ORDINAL = re.compile(r"^(\d+)(st|nd|rd|th)$")
_SENTENCE_END = frozenset(".?!:;\n")
_CONTRACTIONS = {
    "can't": ("can", "not"),
    "cannot": ("can", "not"),
    "won't": ("will", "not"),
    "shan't": ("shall", "not"),
    "ain't": ("is", "not"),
    "i'm": ("i", "am"),
    "let's": ("let", "us"),
    # the same, typed without the apostrophe ("Whats the routing number?")
    "whats": ("what", "is"),
    "hows": ("how", "is"),
    "wheres": ("where", "is"),
    "whos": ("who", "is"),
    "thats": ("that", "is"),
    "theres": ("there", "is"),
}
# chat shorthand, read only as written in lower case ("can u help", "is ur store open",
# "refund b4 it ships"): capitalized, "Ur" and "BC" are names
_TEXTING = {
    "u": ("you",),
    "ur": ("your",),
    "im": ("i", "am"),
    "pls": ("please",),
    "plz": ("please",),
    "thx": ("thanks",),
    "b4": ("before",),
    "abt": ("about",),
    "ppl": ("people",),
    "cuz": ("because",),
    "coz": ("because",),
    "tmrw": ("tomorrow",),
    "tmr": ("tomorrow",),
    "2day": ("today",),
}
# auxiliaries whose "n't" is typed without the apostrophe: "dont", "doesnt", "isnt"
_BARE_NOT = frozenset(
    "do does did is are was were have has had should would could must need".split()
)
_S_IS = frozenset(
    {
        "what",
        "it",
        "that",
        "there",
        "here",
        "who",
        "where",
        "how",
        "when",
        "why",
        "which",
        "he",
        "she",
    }
)
_NOT_ENTITY = frozenset({"i", "ok", "okay", "hi", "hello", "hey", "please", "thanks"})
_AS_FOR = frozenset({"for", "as"})
# a word capitalized after a comma, colon or dash because a question starts there, not
# a name ("Will", "May" may be one)
_OPENS_A_QUESTION = frozenset(
    "how what which why when where who whom whose is are was were am do does did can could "
    "would should shall has have had".split()
)
_ARTICLES = frozenset({"a", "an", "the", "please", "kindly"})
_TEMPORAL_PREP = frozenset(
    {
        "in",
        "on",
        "of",
        "by",
        "until",
        "till",
        "since",
        "before",
        "after",
        "during",
        "early",
        "late",
        "mid",
        "next",
        "last",
        "this",
        "every",
        "from",
        "to",
    }
)
_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "de", "non", "non-", "anti", "a", "mis")
_SWAP_PREFIXES = frozenset(
    {
        "in",
        "ex",
        "im",
        "de",
        "a",
        "as",
        "des",
        "up",
        "down",
        "over",
        "under",
        "pre",
        "post",
        "inter",
        "intra",
        "en",
        "dis",
        "un",
        "con",
        "pro",
        "sub",
        "super",
        "out",
        "on",
        "off",
        "em",
        "e",
        "re",
        "ad",
        "ab",
        "multi",
        "mono",
        "uni",
        "bi",
        "micro",
        "macro",
        "hyper",
        "hypo",
        "inbound",
        "ac",
    }
)
_SUFFIX_OPPOSITES = (("ful", "less"), ("er", "ee"), ("or", "ee"))


# --------------------------------------------------------------------------- lexicons
def _lemma_pairs(pairs: Iterable[tuple[str, str]]) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for a, b in pairs:
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return {k: frozenset(v) for k, v in out.items()}


_OPPOSITES = _lemma_pairs(lx.OPPOSITE_PAIRS)
_SYN_WORDS: dict[str, frozenset[int]] = {}
_SYN_PHRASES: dict[tuple[str, ...], frozenset[int]] = {}
for _gid, _group in enumerate(lx.SYNONYM_GROUPS):
    for _member in _group:
        _parts = tuple(_member.split())
        if len(_parts) == 1:
            _SYN_WORDS[_parts[0]] = _SYN_WORDS.get(_parts[0], frozenset()) | {_gid}
        else:
            _SYN_PHRASES[_parts] = _SYN_PHRASES.get(_parts, frozenset()) | {_gid}
_MAX_PHRASE = max((len(p) for p in _SYN_PHRASES), default=1)


class _Dictionary:
    """Word frequencies (pyspellchecker's English list), loaded once, lazily."""

    _lock = threading.Lock()
    _freq: Any = None

    @classmethod
    def _after_fork(cls) -> None:  # a forked child: a free lock
        cls._lock = threading.Lock()

    @classmethod
    def frequency(cls, word: str) -> int:
        freq = cls._freq
        if freq is None:
            with cls._lock:
                if cls._freq is None:
                    cls._freq = _load_frequencies()
                freq = cls._freq
        return int(freq.get(word, 0))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_Dictionary._after_fork)


def _load_frequencies() -> dict[str, int]:
    try:
        from spellchecker import SpellChecker
    except ImportError:  # no dictionary: every word counts as known (no typo matching)
        return _AllKnown()
    return dict(SpellChecker(distance=1).word_frequency.dictionary)


class _AllKnown(dict):  # type: ignore[type-arg]
    def get(self, key: Any, default: Any = None) -> int:
        return 1


def _packaged_table(name: str) -> dict[str, str]:
    """A gzipped ``key<TAB>rest`` table from ``agent_cache/data`` (``#`` lines are its
    header): key -> rest; empty when the file is gone."""
    import gzip
    from importlib import resources

    try:
        raw = resources.files("agent_cache").joinpath(f"data/{name}")
        text = gzip.decompress(raw.read_bytes()).decode("utf-8")
    except OSError:
        return {}
    return dict(
        line.split("\t", 1) for line in text.splitlines() if line and not line.startswith("#")
    )


def _word_sets(name: str) -> dict[str, frozenset[str]]:
    """A packaged ``word<TAB>words`` table as word -> its words."""
    return {word: frozenset(words.split()) for word, words in _packaged_table(name).items()}


@functools.lru_cache(maxsize=1)
def _wordnet() -> dict[str, str]:
    """The WordNet synonym table (``data/wordnet_synonyms.txt.gz``, built by
    ``scripts/build_wordnet_synonyms.py``): word -> its line's senses, kept as text and
    read per word (:func:`_senses`). Empty when the file is gone."""
    return _packaged_table("wordnet_synonyms.txt.gz")


@functools.lru_cache(maxsize=1)
def _attributes() -> dict[str, frozenset[str]]:
    """The WordNet adjective -> attribute noun table (``data/wordnet_attributes.txt.gz``,
    built by ``scripts/build_wordnet_attributes.py``): "tall" -> "height", "often" ->
    "frequency". Empty when the file is gone."""
    return _word_sets("wordnet_attributes.txt.gz")


@functools.lru_cache(maxsize=1)
def _action_nouns() -> dict[str, frozenset[str]]:
    """The WordNet verb -> action noun table (``data/wordnet_derivations.txt.gz``, built
    by ``scripts/build_wordnet_derivations.py``): "deliver" -> "delivery", "sell" ->
    "selling", "complain" -> "complaint". Empty when the file is gone."""
    return _word_sets("wordnet_derivations.txt.gz")


@functools.lru_cache(maxsize=1)
def _antonyms() -> dict[str, frozenset[str]]:
    """The WordNet word -> opposites table (``data/wordnet_antonyms.txt.gz``, built by
    ``scripts/build_wordnet_antonyms.py``): "drawback" -> "advantage", "sluggish" ->
    "fast". Empty when the file is gone."""
    return _word_sets("wordnet_antonyms.txt.gz")


@functools.lru_cache(maxsize=1)
def _periods() -> frozenset[str]:
    """The WordNet nouns that name a span of time other than a point of the calendar
    or the clock (``data/wordnet_periods.txt.gz``, built by
    ``scripts/build_wordnet_periods.py``): "vacation", "overtime", "probation". Empty
    when the file is gone."""
    return frozenset(_packaged_table("wordnet_periods.txt.gz"))


def _action_noun(x: _Tok, y: _Tok) -> bool:
    """Whether one word is the other's action noun in WordNet, in either order."""
    table = _action_nouns()
    for verb, noun in ((x, y), (y, x)):
        forms = noun.lemmas | {noun.low}
        if any(forms & table.get(v, frozenset()) for v in verb.lemmas | {verb.low}):
            return True
    return False


@functools.lru_cache(maxsize=8192)
def _senses(word: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """(the word's two most frequent senses, the senses they point to as "similar to"
    or "verb group"), or None for a word WordNet links to no other."""
    line = _wordnet().get(word)
    if line is None:
        return None
    ids, near = line.split("\t")
    return frozenset(ids.split()), frozenset(near.split())


def _lexical_synonyms(x: _Tok, y: _Tok) -> bool:
    """Whether WordNet has a sense of ``x`` and one of ``y`` (among each word's two most
    frequent) that are one synset or linked as "similar to" / "verb group"."""
    if x.low in QUANTIFIERS or y.low in QUANTIFIERS:
        return False  # "every" / "all": scope, judged as a frame
    fx = [f for f in map(_senses, x.lemmas | {x.low}) if f is not None]
    fy = [f for f in map(_senses, y.lemmas | {y.low}) if f is not None] if fx else []
    return any(ia & ib or ia & nb or na & ib for ia, na in fx for ib, nb in fy)


@functools.lru_cache(maxsize=1)
def _stemmer() -> Any:
    try:
        import snowballstemmer
    except ImportError:  # pragma: no cover - a core dependency
        return None
    return snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stemmer = _stemmer()
    return str(stemmer.stemWord(word)) if stemmer is not None and word.isalpha() else word


_NEGATIVE_SUFFIXES = ("less", "free", "proof", "ish")
_PARTICLES = lx.DIRECTIONAL | {"in", "on", "less", "free", "proof", "like", "wise"}
_AGENT = re.compile(r"(ator|ation|ion|or|er|ment|ist|ism)$")


@functools.lru_cache(maxsize=65536)
def _derived(a: str, b: str) -> bool:
    """One word derived from the other: same stem, or one is a long prefix of the other
    (relation/relationship, legit/legitimate), but never by a negative suffix (-less)."""
    if not (a.isalpha() and b.isalpha()) or min(len(a), len(b)) < 4:
        return False
    short, long_ = sorted((a, b), key=len)
    if long_.endswith(_NEGATIVE_SUFFIXES) and not short.endswith(_NEGATIVE_SUFFIXES):
        return False
    known = _Dictionary.frequency(a) > 0 and _Dictionary.frequency(b) > 0
    sa, sb = _stem(a), _stem(b)
    if sa == sb and len(sa) >= 4:
        return known
    ra, rb = _AGENT.sub("", sa), _AGENT.sub("", sb)  # inventor/invented, creation/create
    if ra == rb and len(ra) >= 4:
        return known
    if long_.startswith(short):  # relation/relationship; repo/repository (abbreviation)
        if long_[len(short) :] in _PARTICLES:  # checkout is check + out: a compound
            return False
        if len(long_) - len(short) <= 2 and _Dictionary.frequency(long_) == 0:
            return False  # "resett" / "reset": a slip of the keys, judged as a typo
        return len(short) >= 5 or (len(short) >= 3 and _Dictionary.frequency(short) == 0)
    return known and _verb_noun(short, long_)


_NOUN_SUFFIXES = ("ation", "ition", "ion", "ment", "al", "ance", "ence", "ure")


def _verb_noun(verb: str, noun: str) -> bool:
    """A verb and its noun whose stems the stemmer splits: register / registration,
    verify / verification. The noun less its suffix shares all but the verb's last two
    letters (or a verb in -y takes -ication: apply / application, notify /
    notification), the verb reads as a verb and the noun as a noun (opera / operation:
    no)."""
    if len(verb) >= 4 and verb.endswith("y") and noun == verb[:-1] + "ication":
        return "VERB" in _readings(verb) and "NOUN" in _readings(noun)
    for suffix in _NOUN_SUFFIXES:
        if not noun.endswith(suffix):
            continue
        rest = noun[: -len(suffix)]
        common = next(
            (k for k, (a, b) in enumerate(zip(verb, rest, strict=False)) if a != b),
            min(len(verb), len(rest)),
        )
        if len(verb) >= 5 and common >= max(5, len(verb) - 2):
            readings_verb, readings_noun = _readings(verb), _readings(noun)
            return "VERB" in readings_verb and "NOUN" in readings_noun
    return False


class _LemmaTables:
    """lemminflect's lookup functions, their tables loaded once, under a lock.

    lemminflect loads its tables (gzip files) on the first call, without a lock: the
    first burst of concurrent misses after start had every thread load them (16
    threads: ~3 s of duplicate gzip reads on 2 cores, against ~0.3 s for one load).
    """

    _lock = threading.Lock()
    _fns: tuple[Any, Any] | None = None

    @classmethod
    def _after_fork(cls) -> None:  # a forked child: a free lock
        cls._lock = threading.Lock()

    @classmethod
    def get(cls) -> tuple[Any, Any]:
        fns = cls._fns
        if fns is None:
            with cls._lock:
                if cls._fns is None:
                    cls._fns = _load_lemma_tables()
                fns = cls._fns
        return fns


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_LemmaTables._after_fork)


def _load_lemma_tables() -> tuple[Any, Any]:
    try:
        from lemminflect import getAllLemmas, getAllLemmasOOV
    except ImportError:  # pragma: no cover - lemminflect is a core dependency
        return None, None
    getAllLemmas("passwords")  # loads the tables now, in this one thread
    getAllLemmasOOV("passwords", upos="NOUN")
    return getAllLemmas, getAllLemmasOOV


@functools.lru_cache(maxsize=65536)
def _lemmas(word: str) -> frozenset[str]:
    out = {word}
    if word.isalpha() and len(word) > 2:
        get_all, get_all_oov = _LemmaTables.get()
        if get_all is not None:
            found = get_all(word)
            if not found and get_all_oov is not None and word.endswith("s"):
                found = get_all_oov(word, upos="NOUN")
            for forms in found.values():
                out.update(forms)
    return frozenset(out)


# --------------------------------------------------------------------------- tokens
@dataclass
class _Tok:
    text: str
    low: str
    pos: int
    kind: str = "word"  # word | ident | num | sym
    entity: bool = False
    number: str | None = None
    unit: str | None = None
    temporal: str | None = None
    groups: frozenset[int] = frozenset()
    lemmas: frozenset[str] = frozenset()
    parts: tuple[str, ...] = ()
    used: bool = False  # consumed by an acronym or a temporal/number reading
    acronym: bool = False  # "US", "IT", or a capital letter mid-sentence ("type A")
    compound: int = 0  # the pieces of one hyphenated word share a number > 0
    possessive: bool = False  # "Canada's": the 's dropped
    after_mark: bool = False  # a phrase mark (a comma, a full stop) comes right before
    after_stop: bool = False  # a sentence's end (. ? !) comes right before
    dotted: bool = False  # a short capitalized word closed by a full stop: "St.", "Dr."
    verb: bool = False  # a function word used as a verb: "hard to *please*"
    cut: bool = False  # the first word left after a part read past (courtesy, a greeting)

    @property
    def content(self) -> bool:
        if self.verb:
            return not self.used
        if self.acronym:
            return not self.used and self.temporal is None and self.number is None
        return (
            not self.used
            and self.kind in ("word", "ident")
            and self.low not in lx.FUNCTION_WORDS
            and self.low not in lx.NEGATIONS
            and self.low not in lx.QUESTION_WORDS
            and self.low not in lx.DIRECTIONAL
            and self.low not in lx.SYMMETRIC
            and self.temporal is None
            and self.number is None
        )


# written shorthands, a closed class: "w/o an itemized list", "my # to another carrier"
_SHORTHANDS = (
    (re.compile(r"(?<![\w/])w/o(?![\w/])", re.IGNORECASE), "without"),
    (re.compile(r"(?<![\w/])w/(?=\s)", re.IGNORECASE), "with"),
    (re.compile(r"(?<![\w/])b/c(?![\w/])", re.IGNORECASE), "because"),
    # the clinical "-x" shorthands, not a model name ("the RX 580")
    (re.compile(r"(?<![\w/])Rx(?![\w/])(?!\s*\d)", re.IGNORECASE), "prescription"),
    (re.compile(r"(?<![\w/])Dx(?![\w/])(?!\s*\d)", re.IGNORECASE), "diagnosis"),
    (re.compile(r"(?<![\w/])Tx(?![\w/])(?!\s*\d)", re.IGNORECASE), "treatment"),
    (re.compile(r"(?<![\w#])#(?=\s|$|[?.!,;:])"), "number"),
    # "my acct no.?", "policy No. 12345": "no." after a word, before a number or the end
    # (not "yes or no.")
    (re.compile(r"(?<![Oo]r )(?<=[A-Za-z] )no\.(?=\s*(?:\d|[?!,;:)]|$))", re.IGNORECASE), "number"),
)


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")
    for pattern, word in _SHORTHANDS:
        text = pattern.sub(word, text)
    return text


def _split_word(raw: str, low: str) -> list[tuple[str, str]]:
    """Expand contractions and possessives; split hyphenated words that aren't words."""
    if low in _CONTRACTIONS:
        return [(w, w) for w in _CONTRACTIONS[low]]
    if low in _OPERATORS:
        return [(w, w) for w in _OPERATORS[low]]
    if raw.islower() and low in _TEXTING:
        return [(w, w) for w in _TEXTING[low]]
    if raw.islower() and low.endswith("nt") and low[:-2] in _BARE_NOT:
        return [(raw[:-2], low[:-2]), ("not", "not")]
    if low.endswith("n't") and len(low) > 3:
        return [(raw[:-3], low[:-3]), ("not", "not")]
    for suffix, full in (
        ("'re", "are"),
        ("'ve", "have"),
        ("'ll", "will"),
        ("'d", "would"),
        ("'m", "am"),
    ):
        if low.endswith(suffix) and len(low) > len(suffix):
            n = len(suffix)
            return [(raw[:-n], low[:-n]), (full, full)]
    if low.endswith("'s") and len(low) > 2:
        base = (raw[:-2], low[:-2])
        return [base, ("is", "is")] if low[:-2] in _S_IS else [base]
    if low.endswith("'"):
        return [(raw[:-1], low[:-1])] if len(low) > 1 else []
    parts = low.split("-")
    numbered = _PURE_NUMBER.match(parts[0]) or _ORDINAL.match(parts[0])
    if len(parts) > 1 and numbered and all(p.isalpha() for p in parts[1:]):
        # "a 6-year-old", "a 1-hour massage", "2-factor", "3rd-party": a number and the
        # words it counts, read as written apart ("GPT-4", "COVID-19", "utf-8" stay one)
        return [(r, w) for r, w in zip(raw.split("-"), parts, strict=False) if w]
    if "-" in low and not any(c.isdigit() for c in low):
        # always split (check-in / check-out differ in their parts; "log-in" becomes the
        # phrase "log in"), so both spellings of one word read the same
        return [(r, w) for r, w in zip(raw.split("-"), low.split("-"), strict=False) if w]
    return [(raw, low)]


_TITLE_ABBREVIATION = re.compile(r"[A-Z][a-z]{1,3}\Z")


def _tokenize(text: str, unmerged: frozenset[str] = frozenset()) -> list[_Tok]:
    """The text's tokens, multi-word synonyms merged on their first word but for the
    phrases in ``unmerged``."""
    text = _fold(text)
    toks: list[_Tok] = []
    for m in _TOKEN.finditer(text):
        raw = m.group(0).rstrip(".")
        if not raw:
            continue
        before = text[: m.start()].rstrip()
        sentence_start = not before or before[-1] in _SENTENCE_END
        pieces = _split_word(raw, raw.lower())
        compound = m.start() + 1 if "-" in raw and len(pieces) > 1 else 0
        for i, (piece, low) in enumerate(pieces):
            if not low:
                continue
            tok = _Tok(piece, low, len(toks), compound=compound)
            tok.possessive = raw.lower().endswith("'s") and low == raw.lower()[:-2]
            # a dash with a space after it marks a phrase as a comma does ("Sorry to
            # bother you - what's ..."); in "W-2" or "pre- and post-" it joins words
            dash = before[-1:] in _DASHES and text[m.start() - 1].isspace()
            tok.after_mark = i == 0 and bool(before) and (before[-1] in _PHRASE_MARKS or dash)
            tok.after_stop = i == 0 and bool(before) and before[-1] in ".?!"
            dot = text[m.end() : m.end() + 1] == "."
            tok.dotted = dot and _TITLE_ABBREVIATION.match(raw) is not None
            _classify(tok, sentence_start and i == 0)
            toks.append(tok)
    _demote_title_case(toks)
    _please_as_verb(toks)
    _respell_closed(toks)
    _read_numbers(toks)
    _read_temporal(toks)
    _merge_phrases(toks, unmerged)
    for i, tok in enumerate(toks):
        tok.pos = i
    return toks


def _please_as_verb(toks: list[_Tok]) -> None:
    """ "please" after "to" and before no verb is the verb ("Is the teacher hard to
    *please*?", "trying to please my boss"), not the courtesy ("Is it possible to please
    cancel my order?", read past)."""
    for i in range(1, len(toks)):
        if toks[i].low != "please" or toks[i - 1].low != "to":
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is None or nxt.kind == "sym" or nxt.after_mark or "VERB" not in _readings(nxt.low):
            toks[i].verb = True


def _closed_words() -> frozenset[str]:
    """Words of the closed classes the frames read (long modals, days, months, times of
    day, units of time) a typo must not hide: four letters or more."""
    words = {"should", "would", "could", "might"}
    words |= set(lx.WEEKDAYS.values()) | set(lx.MONTHS.values()) | set(lx.TEMPORAL_WORDS)
    words |= {d + "s" for d in lx.WEEKDAYS.values()}  # full names: "sept" would read "dept"
    words |= set(lx.TIME_UNITS) | {u + "s" for u in lx.TIME_UNITS}
    words |= {"hour", "hours", "minute", "minutes", "second", "seconds"}
    return frozenset(w for w in words if len(w) >= 4 and w.isalpha())


_CLOSED = _closed_words()


def _respell_closed(toks: list[_Tok]) -> None:
    """A word the dictionary lacks, one edit from exactly one word of a closed class and
    with its first letter, is that word ("How long *shoud* I ...", "open on *satruday*",
    "last *yaer*"): the modality and time frames read it before any typo matching, and a
    misspelled "should" or "Saturday" is no missing modal or day."""
    for t in toks:
        if t.kind != "word" or len(t.low) < 4 or not t.low.isalpha():
            continue
        if t.low in _CLOSED or _Dictionary.frequency(t.low) > 0:
            continue
        near = [
            w
            for w in _CLOSED
            if w[0] == t.low[0] and abs(len(w) - len(t.low)) <= 1 and _osa(t.low, w, 1) <= 1
        ]
        if len(near) == 1:
            t.low, t.lemmas, t.entity = near[0], frozenset({near[0]}), False


def _classify(tok: _Tok, sentence_start: bool) -> None:
    low = tok.low
    if _PURE_NUMBER.match(low):
        tok.kind = "num"
        tok.number = re.sub(r",(?=\d{3}\b)", "", low)
        return
    glued = _GLUED.match(low)
    if glued and (glued.group(2) in lx.UNITS):
        tok.kind = "num"
        tok.number, tok.unit = glued.group(1), lx.UNITS[glued.group(2)]
        return
    ordinal = _ORDINAL.match(low)
    if ordinal:
        tok.kind = "num"
        tok.number = "#" + ordinal.group(1)
        return
    if len(low) == 1 and not low.isalnum():
        tok.kind = "sym"
        return
    if any(c.isdigit() for c in low):
        tok.kind = "ident"
        tok.entity = True
    else:
        caps = sum(c.isupper() for c in tok.text)
        acronym = caps >= 2 and len(tok.text) > 1
        capitalized = tok.text[:1].isupper() and not sentence_start
        if tok.after_mark and low in _OPENS_A_QUESTION:  # "Hi, What's ...", "Q - How do"
            capitalized = False
        tok.entity = (acronym or capitalized) and low not in _NOT_ENTITY
        if low in lx.NUMBER_WORDS:
            tok.number = _num(lx.NUMBER_WORDS[low])
        elif low in lx.ORDINALS and low not in ("first", "last", "second"):
            tok.number = "#" + str(lx.ORDINALS[low])
    acronym_like = sum(c.isupper() for c in tok.text) >= 2
    tok.acronym = low not in _NOT_ENTITY and (
        (acronym_like and tok.text.isupper())
        or (len(tok.text) == 1 and tok.text.isupper() and not sentence_start and low != "i")
    )
    if tok.acronym:
        tok.entity = True
    tok.lemmas = frozenset({low}) if acronym_like else _lemmas(low)
    tok.groups = frozenset().union(*(_SYN_WORDS.get(w, frozenset()) for w in tok.lemmas))


_COMMON = 5000  # dictionary frequency above which a capitalized word may be plain English


def _demote_title_case(toks: list[_Tok]) -> None:
    """In Title Case Writing ("the English Language", "Mobile App") capitals say little:
    common dictionary words there are not names."""
    capitalized = [
        t
        for t in toks
        if t.entity
        and t.kind == "word"
        and t.text[:1].isupper()
        and sum(ch.isupper() for ch in t.text) == 1
    ]
    if len(capitalized) < 2:
        return
    for t in capitalized:
        if _Dictionary.frequency(t.low) >= _COMMON:
            t.entity = False


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _read_numbers(toks: list[_Tok]) -> None:
    """Attach units (``5 kg``, ``$50``); fold ``twenty five`` and ``3 million``."""
    for i, tok in enumerate(toks):
        if tok.low == "once" and i + 1 < len(toks) and toks[i + 1].low in ONCE_SUBJECTS:
            tok.number = None  # "once it has shipped": when, not one time (a relation)
        if tok.number is None:
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        prev = toks[i - 1] if i else None
        if tok.unit is None and nxt is not None and nxt.number is None:
            if tok.low == "half" and nxt.low in ("a", "an") and i + 2 < len(toks):
                nxt = toks[i + 2]  # "half an hour", "half a cup"
            unit = lx.UNITS.get(nxt.low)
            if unit is not None:
                tok.unit = unit
                nxt.used = True
        if prev is not None and prev.low in lx.CURRENCY:
            tok.unit = lx.UNITS[prev.low]
            prev.used = True
    _read_fractions(toks)
    # "one" is a pronoun as often as a number ("which one", "how does one apply"): a
    # number before a unit or a noun it counts ("one entry", "one time a day")
    for i, tok in enumerate(toks):
        if tok.low == "one" and tok.unit is None and not _counts_a_noun(toks, i):
            tok.number = None


def _read_fractions(toks: list[_Tok]) -> None:
    """ "1/4 cup", "1/2 tablet": a fraction before a unit or a noun is one number (0.25,
    0.5), as "a quarter cup" or "half a tablet" says it; "12/25" (a date) is not read
    (the numerator must be under the denominator, the denominator at most 16)."""
    for i in range(len(toks) - 2):
        a, bar, b = toks[i], toks[i + 1], toks[i + 2]
        if a.kind != "num" or bar.low != "/" or b.kind != "num" or a.unit is not None:
            continue
        try:
            top, bottom = int(a.low), int(b.low)
        except ValueError:
            continue
        nxt = toks[i + 3] if i + 3 < len(toks) else None
        if not (0 < top < bottom <= 16) or (b.unit is None and (nxt is None or not nxt.content)):
            continue
        a.number, a.unit = _num(round(top / bottom, 6)), b.unit
        bar.used = b.used = True
        b.number = b.unit = None


_NOT_COUNTING = frozenset("which the this that each every any no another some".split())


def _counts_a_noun(toks: list[_Tok], i: int) -> bool:
    """``toks[i]`` ("one") counts the noun after it: the next word reads only as a noun
    ("one entry", not "one use" / "one apply"), with no determiner before "one"."""
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if nxt is None or nxt.kind != "word" or nxt.low in lx.FUNCTION_WORDS:
        return False
    if i and toks[i - 1].low in _NOT_COUNTING:
        return False
    return _readings(nxt.low) == {"NOUN"}


_GREETING_TIMES = frozenset({"morning", "afternoon", "evening", "night", "day"})


_EVERY = frozenset({"per", "each", "every", "a", "an"})
_PER_UNIT = {
    "hour": "hourly",
    "day": "daily",
    "week": "weekly",
    "month": "monthly",
    "quarter": "quarterly",
    "year": "yearly",
}


# before "a day", a length of time, not a rate: "in a day", "half an hour", "more than a year"
_NOT_A_RATE = _TEMPORAL_PREP | frozenset(
    "half quarter third than about around almost nearly over under within just only whole "
    "entire full".split()
)


_SHORT_TIME_UNITS = {"h": "hour", "day": "day", "week": "week", "month": "month", "year": "year"}


def _time_unit(word: str) -> str:
    """The time unit a word names, written out or short ("yrs", "wk", "hr", "mo"):
    "year", "week", "hour", "month"; otherwise the word's singular."""
    return _SHORT_TIME_UNITS.get(lx.UNITS.get(word, ""), "") or _singular(word)


def _per_unit(toks: list[_Tok], i: int) -> bool:
    """ "per day", "each week", "every month", "twice a year" (not "in a day"), "per yr":
    a rate, the same as "daily", "weekly", "monthly", "yearly"."""
    low = toks[i].low
    if low not in _EVERY or i + 1 >= len(toks) or _time_unit(toks[i + 1].low) not in _PER_UNIT:
        return False
    return low not in ("a", "an") or (i > 0 and toks[i - 1].low not in _NOT_A_RATE)


def _read_temporal(toks: list[_Tok]) -> None:
    for i, tok in enumerate(toks):
        low = tok.low
        prev = toks[i - 1].low if i else ""
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if low in lx.RELATIVE_TIME and nxt is not None:
            unit = _time_unit(nxt.low)
            if unit in lx.TIME_UNITS:
                tok.temporal = f"{low}:{unit}"
                nxt.used = True
                continue
        if nxt is not None and _per_unit(toks, i):
            nxt.temporal = _PER_UNIT[_time_unit(nxt.low)]  # "per day" is "daily"
            tok.used = True
            continue
        if tok.used:
            continue
        value = lx.TEMPORAL_WORDS.get(low)
        if value in ("am", "pm") and not (i and toks[i - 1].kind == "num"):
            value = None  # "Am I allowed...": a time of day only after a number
        if prev == "good" and low in _GREETING_TIMES:
            value = None  # "Good morning.": a greeting, not a time
        if value is not None and low not in lx.RELATIVE_TIME:
            tok.temporal = value
        elif low in lx.WEEKDAYS and (low not in ("sun", "sat", "wed") or tok.entity):
            tok.temporal = lx.WEEKDAYS[low]
        elif low in lx.MONTHS:
            near_number = (nxt is not None and nxt.kind == "num") or (
                i and toks[i - 1].kind == "num"
            )
            if (
                low not in lx.AMBIGUOUS_MONTHS
                or near_number
                or (tok.entity and prev in _TEMPORAL_PREP)
            ):
                tok.temporal = lx.MONTHS[low]
        elif low == "fall" and prev in ("this", "next", "last", "the", "in"):
            tok.temporal = "autumn"
        elif (
            tok.number is not None
            and tok.unit is None
            and tok.kind == "num"
            and re.fullmatch(r"(19|20)\d\d", tok.number)
        ):
            tok.temporal = "year:" + tok.number
            tok.number = None


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


def _merge_phrases(toks: list[_Tok], unmerged: frozenset[str] = frozenset()) -> None:
    """Give multi-word synonyms (``turn on``, ``log in``) one group id, on their first
    word; not the phrases in ``unmerged``."""
    i = 0
    while i < len(toks):
        for n in range(min(_MAX_PHRASE, len(toks) - i), 1, -1):
            key = tuple(t.low for t in toks[i : i + n])
            groups = _SYN_PHRASES.get(key)
            if groups is None:
                lem = tuple(sorted(toks[i].lemmas))
                for first in lem:
                    groups = _SYN_PHRASES.get((first, *key[1:]))
                    if groups is not None:
                        break
            if groups is not None and " ".join(key) not in unmerged:
                head = toks[i]
                head.groups = head.groups | groups
                head.parts = key
                head.kind = "word"
                head.low = " ".join(key)
                head.lemmas = frozenset({head.low, head.low.replace(" ", "")})
                for t in toks[i + 1 : i + n]:
                    t.used = True
                i += n - 1
                break
        i += 1


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Difference:
    """One thing that differs between the query and the candidate.

    Attributes:
        kind: a refusal reason from :data:`REASONS`, or an explained difference
            (``typo``, ``synonym``, ``lexical`` (a WordNet synonym), ``acronym``,
            ``filler``, ``repeat``, ``detail``).
        query: the query's side ("" when the query has nothing there).
        candidate: the candidate's side.
        refuses: whether this difference alone refuses the candidate.
    """

    kind: str
    query: str
    candidate: str
    refuses: bool

    def __str__(self) -> str:
        verdict = "refuses" if self.refuses else "allowed"
        q, c = self.query or "∅", self.candidate or "∅"
        return f"{self.kind}: {q!r} vs {c!r} ({verdict})"


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyze` found; ``bool(analysis)`` is True when it refuses.

    Attributes:
        query, candidate: the two texts.
        differences: every difference found, refusing ones first.
        equivalent: no refusal, and every content word on both sides was matched (by
            lemma, synonym, acronym or as a typo): the texts ask the same thing in other
            words, so a lower similarity than the threshold may serve them.
        shared: how many content words were matched.
        synonymous: equivalent but for a word matched only as a WordNet synonym
            (``lexical``): one sense of each word agrees, so the texts may ask the same
            thing; the semantic layer serves such a pair from a higher similarity than
            an equivalent one.
        reworded: no refusal and every content word matched, but in another form or
            frame: a verb and its noun ("How do I cancel X?" / "What is the
            cancellation process for X?"), fillers, function words. The semantic layer
            serves it from :data:`~agent_cache.semantic.REWORDED_FLOOR`.
        read: the two texts as the analysis reads them (typos and synonyms in the
            candidate's words, acronyms spelled out, fillers left out) when nothing
            refuses and they read otherwise than written; else ``("", "")``.
        asked: the two questions as asked when courtesy, a greeting or thanks was read
            past or a typo respelled ("Hi there! How can I boost my savings rate?" asks
            "How can I boost my savings rate"); else ``("", "")``. The model check
            measures a swapped word on these.
    """

    query: str
    candidate: str
    differences: tuple[Difference, ...] = field(default_factory=tuple)
    equivalent: bool = False
    shared: int = 0
    synonymous: bool = False
    reworded: bool = False
    read: tuple[str, str] = ("", "")
    asked: tuple[str, str] = ("", "")

    @property
    def refusals(self) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.refuses)

    @property
    def reason(self) -> str:
        """The first refusing difference's kind (in :data:`REASONS` order), or ``""``."""
        kinds = {d.kind for d in self.refusals}
        return next((r for r in REASONS if r in kinds), "")

    @property
    def refused(self) -> bool:
        """Whether a difference refuses the pair (same as :attr:`refuses`)."""
        return bool(self.refusals)

    @property
    def refuses(self) -> bool:
        """Whether a difference refuses the pair: say ``analysis.refuses``, not
        ``bool(analysis)`` (kept for compatibility, it reads the other way round from
        what many expect of an "analysis" object).

        Example:
            >>> analyze("Sort in ascending order", "Sort in descending order").refuses
            True
        """
        return bool(self.refusals)

    def __bool__(self) -> bool:
        return self.refused

    def __str__(self) -> str:
        head = (
            f"refused ({self.reason})"
            if self.refused
            else ("equivalent" if self.equivalent else "not refused (similarity decides)")
        )
        lines = [f"{self.query!r} vs {self.candidate!r}: {head}"]
        lines += [f"  - {d}" for d in self.differences]
        return "\n".join(lines)


# --------------------------------------------------------------------------- analysis
def _osa(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment edit distance, stopping early above ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


@functools.lru_cache(maxsize=65536)
def _typo(a: str, b: str) -> bool:
    if not (a.isalpha() and b.isalpha()) or min(len(a), len(b)) < 3:
        return False
    limit = 1 if min(len(a), len(b)) <= 6 else 2
    if _osa(a, b, limit) > limit:
        return False
    fa, fb = _Dictionary.frequency(a), _Dictionary.frequency(b)
    if min(len(a), len(b)) == 3:  # "gti" for "git": one side unknown, same first letter
        return a[0] == b[0] and (fa == 0) != (fb == 0)
    # a typo produces a word the dictionary lacks, or one far rarer than the intended one
    return fa == 0 or fb == 0 or fa * 100 < fb or fb * 100 < fa


@functools.lru_cache(maxsize=65536)
def _morphological_opposites(a: str, b: str) -> bool:
    """Opposites by form: un-/dis-/in-/de-/non- + word, a swapped prefix, -ful/-less.

    One must be a dictionary word, and an unknown one more than one edit from it:
    "decending" is a typo of "descending", not its opposite; "unarchive" is not a typo.
    """
    if a == b or min(len(a), len(b)) < 3 or not (a.isalpha() and b.isalpha()):
        return False
    known_a, known_b = _Dictionary.frequency(a) > 0, _Dictionary.frequency(b) > 0
    if not (known_a or known_b):
        return False
    # an unknown word one edit from the other is its typo; two or more edits apart it is
    # a word the dictionary lacks ("unarchive", "offboard"), read by its prefix
    if not (known_a and known_b) and _osa(a, b, 1) <= 1:
        return False
    short, long_ = sorted((a, b), key=len)
    for p in _PREFIXES:
        if long_ == p + short or long_ == p + "-" + short:
            return len(short) >= 4 or p in ("un", "dis", "non")
    for s1, s2 in _SUFFIX_OPPOSITES:
        if a.endswith(s1) and b.endswith(s2) and a[: -len(s1)] == b[: -len(s2)] != "":
            return len(a) - len(s1) >= 3
        if b.endswith(s1) and a.endswith(s2) and b[: -len(s1)] == a[: -len(s2)] != "":
            return len(b) - len(s1) >= 3
    # one stem under two prefixes: ascending/descending, import/export, inbound/outbound,
    # reactivate/deactivate (whose common ending "eactivate" runs into the prefixes: every
    # split of it is tried)
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    for cut in range(n, 2, -1):
        pa, pb = a[: len(a) - cut], b[: len(b) - cut]
        if cut == 3 and min(len(pa), len(pb)) < 2:
            continue  # a three-letter stem only under two real prefixes: prepay/repay
        if pa and pb and pa != pb and pa in _SWAP_PREFIXES and pb in _SWAP_PREFIXES:
            return True
    return False


def _forms(t: _Tok) -> frozenset[str]:
    """The token's lemmas plus the one-word members of its synonym groups."""
    out = set(t.lemmas) | {t.low}
    for gid in t.groups:
        out.update(w for w in lx.SYNONYM_GROUPS[gid] if " " not in w)
    return frozenset(out)


def _opposite(x: _Tok, y: _Tok) -> bool:
    if x.low == y.low:
        return False
    fx, fy = _forms(x), _forms(y)
    for a in fx:
        opp = _OPPOSITES.get(a)
        if opp and opp & fy:
            return True
    words = x.content and y.content and not {x.low, y.low} & QUANTIFIERS
    table = _antonyms() if words else {}  # "all" / "any" is a scope, judged as a frame
    ly = y.lemmas | {y.low}
    if any(table.get(a, frozenset()) & ly for a in x.lemmas | {x.low}):
        return True
    return _morphological_opposites(x.low, y.low)


def _matches(x: _Tok, y: _Tok, how: str) -> bool:
    """Whether ``x`` and ``y`` match in the sense ``how`` (one alignment pass)."""
    if how == "exact":
        return x.low == y.low
    if how == "same":
        if _dated_short(x, y) or _dated_short(y, x):
            return True
        if x.temporal is not None and x.temporal == y.temporal:  # "Sat" / "Saturday"
            return True
        if (x.entity or x.acronym) and (y.entity or y.acronym):  # "IIT" / "IITs"
            return _singular(x.low) == _singular(y.low)
        return bool(x.lemmas & y.lemmas)
    if how == "synonym":
        return bool(x.groups & y.groups)
    if how == "abbreviation":
        return (
            _abbreviates(x.low, y.low)
            or _abbreviates(y.low, x.low)
            or _marked_short(x, y)
            or _marked_short(y, x)
        )
    if x.kind != "word" or y.kind != "word":
        return False
    if how == "spelling":
        return _spelling_variants(x.low, y.low)
    if how == "lexical":
        return x.content and y.content and _lexical_synonyms(x, y) and not _opposite(x, y)
    if how == "derived":
        return (_derived(x.low, y.low) or _action_noun(x, y)) and not _opposite(x, y)
    return _typo(x.low, y.low) and not _opposite(x, y)


# British and American spellings of one word: each rule rewrites a British ending (or
# inner letters) to the American one; two words that agree after it are one word.
_SPELLING_RULES = (
    (re.compile(r"(?<=[a-z]{3})our(?=s?$|ed$|ing$|ite|able|ful|less)"), "or"),  # colour
    (re.compile(r"(?<=[a-z]{2}[bcdfghklmnprstvz])re(?=s?$|d$)"), "er"),  # centre, fibre
    (re.compile(r"(?<=[a-z]{2})is(?=e$|es$|ed$|ing$|ation)"), "iz"),  # organise
    (re.compile(r"(?<=[a-z]{2})ys(?=e$|es$|ed$|ing$)"), "yz"),  # analyse
    (re.compile(r"(?<=[a-z]{3})ence(?=s?$)"), "ense"),  # licence, defence
    (re.compile(r"(?<=[a-z]{3})ogue(?=s?$)"), "og"),  # catalogue
    (re.compile(r"(?<=[aeiou])ll(?=ed$|ing$|er$|ers$|or$|ors$)"), "l"),  # travelling
    (re.compile(r"(?<=[a-z])(?:ae|oe)(?=[a-z]{2})"), "e"),  # anaemia, oestrogen
)


@functools.lru_cache(maxsize=65536)
def _american(word: str) -> str:
    for rule, repl in _SPELLING_RULES:
        word = rule.sub(repl, word)
    return word


@functools.lru_cache(maxsize=65536)
def _spelling_variants(a: str, b: str) -> bool:
    """``colour``/``color``, ``licence``/``license``, ``travelling``/``traveling``: the
    same word in British and American spelling (a rule over endings, not a list), one
    of them known to the dictionary."""
    if a == b or min(len(a), len(b)) < 5 or not (a.isalpha() and b.isalpha()):
        return False
    if _american(a) != _american(b):
        return False
    return _Dictionary.frequency(a) > 0 or _Dictionary.frequency(b) > 0


_NUMERONYM = re.compile(r"^([a-z])(\d{1,2})([a-z])$")
_VOWELS = frozenset("aeiou")


def _dated_short(short: _Tok, long_: _Tok) -> bool:
    """A month or a weekday written short with a full stop for its name: "Jan. 1" /
    "January 1", "open on Sat." / "on Saturday", "the Aug. deadline" / "the August ..."."""
    if not short.dotted or long_.temporal is None or len(short.low) < 3:
        return False
    return short.temporal == long_.temporal or long_.temporal.startswith(short.low)


def _marked_short(short: _Tok, long_: _Tok) -> bool:
    """A word its writer marked as short ("St.", "Dr.", "Mt.") for a dictionary word that
    starts and ends with its first and last letters and holds the others in order: "Main
    *St.*" / "Main *Street*", "*Dr.* Smith" / "*Doctor* Smith". ("int'l" is left alone:
    "international" or "internal", a shortening by apostrophe names no one word.)"""
    if not short.dotted or not long_.low.isalpha() or len(long_.low) < len(short.low) + 2:
        return False
    if short.low[0] != long_.low[0] or short.low[-1] != long_.low[-1]:
        return False  # a contraction keeps the first and the last letter: "Dr" is no "Drake"
    if _Dictionary.frequency(long_.low) == 0:
        return False
    rest = iter(long_.low[1:])
    return all(ch in rest for ch in short.low[1:])


def _contracts(short: str, long_: str) -> bool:
    """A contraction of ``long_``: its first letter (``pkg``, ``acct``) or a clipping of
    two letters or more (``govt``, ``dept``: four letters or more, rare as a word beside
    the expansion), then consonants only, in order, the last one a consonant."""
    if short[-1] in _VOWELS:
        return False
    if len(short) >= 3 and not (_VOWELS & set(short[1:])):
        it = iter(long_[1:])
        if all(ch in it for ch in short[1:]):
            return True
    if len(short) < 4 or _Dictionary.frequency(short) * 1000 > _Dictionary.frequency(long_):
        return False
    for cut in range(2, len(short) - 1):
        rest = short[cut:]
        if _VOWELS & set(rest) or not long_.startswith(short[:cut]):
            continue
        it = iter(long_[cut:])
        if all(ch in it for ch in rest):
            return True
    return False


@functools.lru_cache(maxsize=65536)
def _abbreviates(short: str, long_: str) -> bool:
    """``short`` is an abbreviation of the word ``long_``, by its form alone:

    - a numeronym: first letter, the count of letters left out, last letter (``k8s`` =
      kubernetes, ``i18n``, ``a11y``);
    - a clipping: a prefix of three letters or more (``prod``/production, ``env``,
      ``config``, ``docs``/documentation: plurals compared on their stems);
    - a contraction: the first letter, then consonants only, in order (``pkg``/package,
      ``msg``/message, ``acct``/account), or a clipping closed by consonants in order
      (``govt``/government, ``dept``/department: four letters or more, the short form
      rare as a word beside its expansion);
    - the initials of a compound of two dictionary words (``db``/database: data+base).

    The long form must be a dictionary word clearly longer than the short one, and a
    clipping no more frequent as a word of its own than its expansion (``cat`` is not
    short for category, nor ``man`` for manager).
    """
    if not long_.isalpha() or len(long_) < len(short) + 2 or len(short) < 2:
        return False
    numeronym = _NUMERONYM.match(short)
    if numeronym:
        first, count, last = numeronym.groups()
        return long_[0] == first and long_[-1] == last and len(long_) == int(count) + 2
    if not short.isalpha() or short[0] != long_[0] or _Dictionary.frequency(long_) == 0:
        return False
    s, ll = short, long_
    if s.endswith("s") and len(s) > 3:  # docs / documentation, stats / statistics
        s, ll = s[:-1], (ll[:-1] if ll.endswith("s") else ll)
    if (
        len(s) >= 3
        and len(ll) >= len(s) + 3
        and ll.startswith(s)
        and ll[len(s) :] not in _PARTICLES
        and _Dictionary.frequency(short) <= _Dictionary.frequency(long_)  # not cat/category
    ):
        return True
    if _contracts(short, long_):
        return True
    if len(short) == 2:  # initials of a closed compound: database, keyboard, password
        for cut in range(3, len(long_) - 2):
            head, tail = long_[:cut], long_[cut:]
            if (
                tail[0] == short[1]
                and _Dictionary.frequency(head) >= _COMMON
                and _Dictionary.frequency(tail) >= _COMMON
            ):
                return True
    return False


def _initials(tok: _Tok) -> str:
    if tok.number is not None and tok.unit is None:
        return tok.number
    return tok.low[:1]


# words an acronym may leave out: "pounds per square inch" (PSI), "date of birth" (DOB)
_ACRONYM_SKIPS = frozenset("of and the for & per in on to a an at with".split())


def _spells_out(run: list[_Tok]) -> bool:
    """Words an acronym can stand for: one content word at least, not opening with an
    auxiliary, a pronoun or an article ("What *is the* best school" is not "IT")."""
    first = run[0].low
    if first in _AUXILIARIES or first in _PRONOUN_CASE or first in _ARTICLES:
        return False
    return any(t.content for t in run)


def _match_joined(side: list[_Tok], other: list[_Tok]) -> list[Difference]:
    """A word written in pieces on ``side`` and whole on ``other``: hyphenated ("Wi-Fi",
    "e-mail", "check-in", "co-pay" / "wifi", "email", "checkin", "copay") or a name
    written apart ("Mac Book" / "MacBook"), a spelling (``typo``). Two words that are
    not one name stay two words: "paid over time" is not "paid overtime"."""
    found: list[Difference] = []
    for y in other:
        dotted = next((x for x in side if _same_letters(x, y)), None)
        if dotted is not None:  # "U.S." / "US", "Ph.D." / "PhD", "a.m." / "AM"
            for t in (dotted, y):
                t.used, t.temporal = True, None
            found.append(Difference("typo", dotted.text, y.text, False))
            continue
        if y.used or y.kind != "word" or len(y.low) < 4 or not y.low.isalpha():
            continue
        for i in range(len(side)):
            run = next(
                (
                    side[i : i + n]
                    for n in (2, 3)
                    if i + n <= len(side)
                    and all(not t.used and t.kind == "word" for t in side[i : i + n])
                    and "".join(t.low for t in side[i : i + n]) == y.low
                ),
                None,
            )
            if run is None:
                continue
            hyphenated = run[0].compound > 0 and all(t.compound == run[0].compound for t in run)
            if hyphenated or all(t.text[:1].isupper() for t in run) or _phrasal_joined(run, y):
                for t in (*run, y):
                    t.used = True
                joiner = "-" if hyphenated else " "
                found.append(Difference("typo", joiner.join(t.text for t in run), y.text, False))
                break
    return found


def _phrasal_joined(run: list[_Tok], y: _Tok) -> bool:
    """A verb and its particle written as one word, a word of its own: "back up" /
    "backup", "set up" / "setup", "check out" / "checkout" ("paid over time" is no
    verb and particle of "overtime")."""
    return (
        len(run) == 2
        and run[1].low in _NOUN_PARTICLES | {"in"}
        and "VERB" in _readings(run[0].low)
        and _Dictionary.frequency(y.low) > 0
    )


def _same_letters(x: _Tok, y: _Tok) -> bool:
    """``x`` written with dots that ``y`` leaves out, the same letters otherwise: "U.S." /
    "US", "Node.js" / "NodeJS"; or a name with a digit written with a hyphen ``y``
    leaves out: "W-2" / "W2", "COVID-19" / "COVID19". A lower-case function word is not
    an acronym ("us")."""
    if x.used or y.used:
        return False
    if x.kind == "ident" and y.kind == "ident" and "-" in x.low and "-" not in y.low:
        return x.low.replace("-", "") == y.low
    if "." not in x.low or "." in y.low or x.kind != "word":
        return False
    if y.low in lx.FUNCTION_WORDS and y.text.islower():
        return False
    return x.low.replace(".", "") == y.low and len(y.low) >= 2


def _match_acronyms(side: list[_Tok], other: list[_Tok]) -> list[Difference]:
    """An acronym on ``side`` spelled by the initials of a run of words on ``other``, or,
    failing any such run, by initials and later letters (:func:`_spelled_within`)."""
    found: list[Difference] = []
    other_lows = {t.low for t in other if not t.used}
    for tok in side:
        if tok.used or not (2 <= len(tok.low) <= 6 and tok.low.isalnum()):
            continue
        if tok.low in other_lows:
            continue
        if tok.entity or _lower_acronym(tok):
            run = _spelled_by_initials(tok.low, other) or _camel_cased(tok.low, other)
        elif _typed_lower(tok):  # "my atm pin" / "personal identification number"
            run = _spelled_by_initials(tok.low, other)
            run = run if len(run) == len(tok.low) else []
        else:
            continue
        if not run and tok.entity:
            own = frozenset(t.low for t in side)  # a word both sides hold spells nothing
            run = next(
                (r for k in range(len(other)) if (r := _spelled_within(tok.low, other[k:], own))),
                [],
            )
        if run:
            for t in run:  # spelled out, not a date: "annual percentage yield" (APY)
                t.used, t.temporal = True, None
            tok.used, tok.temporal = True, None  # "APR" spelled out is not April
            found.append(Difference("acronym", tok.text, " ".join(t.text for t in run), False))
    return found


#: A word at most this frequent in the dictionary (per its counts) may be an acronym
#: typed in lower case ("asap" 175, "eta" 1,212; "car" 446,851, "tap" 22,040).
_RARE_AS_WORD = 5_000


def _lower_acronym(tok: _Tok) -> bool:
    """An acronym typed in lower case ("eta", "pto", "wfh", "asap"): three letters or
    more, a rare word or none; it stands for a run only when that run's initials spell
    it (never by later letters: :func:`_spelled_within` is for capitals)."""
    return (
        tok.kind == "word"
        and tok.text.islower()
        and len(tok.low) >= 3
        and tok.low.isalpha()
        and tok.low not in lx.FUNCTION_WORDS
        and _Dictionary.frequency(tok.low) <= _RARE_AS_WORD
    )


def _typed_lower(tok: _Tok) -> bool:
    """A word in lower case that may be an acronym typed so, however common as a word
    ("hr", "pin", "pc"): it stands for a run only when that run's initials spell it,
    one word to a letter."""
    low = tok.low
    return (
        tok.kind == "word"
        and tok.text.islower()
        and 2 <= len(low) <= 5
        and low.isalpha()
        and low not in lx.FUNCTION_WORDS
    )


def _spelled_by_initials(target: str, other: list[_Tok]) -> list[_Tok]:
    """The first run of words in ``other`` whose initials spell ``target`` (a small word
    may be left out: "pounds per square inch", PSI); [] when none does."""
    for start in range(len(other)):
        spelled, run = "", list[_Tok]()
        for t in other[start:]:
            if t.used or t.kind == "sym":
                break
            if run and t.low in _ACRONYM_SKIPS and not target.startswith(spelled + t.low[:1]):
                run.append(t)
                continue
            spelled += _initials(t)
            run.append(t)
            if not target.startswith(spelled):
                break
            if spelled == target:
                break
        if spelled == target and len(run) >= 2 and _spells_out(run):
            return run
    return []


def _camel_cased(target: str, other: list[_Tok]) -> list[_Tok]:
    """One word of ``other`` whose capitals spell ``target``: "JS" is *J*ava*S*cript,
    "GH" *G*it*H*ub; [] when none."""
    for t in other:
        caps = "".join(ch for ch in t.text if ch.isupper())
        camel = t.text[:1].isupper() and not t.text.isupper() and len(caps) >= 2
        if camel and not t.used and caps.lower() == target:
            return [t]
    return []


def _spelled_within(target: str, words: Sequence[_Tok], own: frozenset[str]) -> list[_Tok]:
    """The run of ``words`` from the first that spells ``target`` the way acronyms are
    coined beyond initials (Schwartz & Hearst's rule for abbreviation definitions): each
    word gives its first letter, then, in order, later letters that open a part of it
    (:func:`_part_start`: "NSAIDs": *N*on*S*teroidal *A*nti-*I*nflammatory *D*rug*s*;
    "LHR": *L*ondon *H*eath*r*ow), a small word may be left out; [] when none does.
    Three letters at least, letters only: "BP" is initials or nothing."""
    if len(target) < 3 or not target.isalpha():
        return []

    def spell(rest: str, k: int) -> int:  # words used to spell ``rest`` from words[k], or -1
        if not rest:
            return 0
        if k >= len(words) or k >= len(target) + 2:
            return -1
        t = words[k]
        if k and t.low in _ACRONYM_SKIPS:
            n = spell(rest, k + 1)  # "Department *of* Motor Vehicles"
            if n >= 0:
                return n + 1
        if t.used or t.kind != "word" or t.acronym or t.low in own or t.low[:1] != rest[0]:
            return -1
        i = 1
        best = spell(rest[1:], k + 1)
        for at in range(1, len(t.low)):  # later letters, in order, each at most once
            if i < len(rest) and t.low[at] == rest[i] and _part_start(t.low, at, rest[i:]):
                i += 1
                n = spell(rest[i:], k + 1)
                if n >= 0 and (best < 0 or n < best):
                    best = n
        return best + 1 if best >= 0 else -1

    n = spell(target, 0)
    run = list(words[:n]) if n >= 2 else []
    return run if run and run[-1].low not in _ACRONYM_SKIPS and _spells_out(run) else []


def _part_start(word: str, at: int, rest: str) -> bool:
    """Whether a letter inside ``word`` may stand in an acronym: it opens the second part
    of a compound or a prefixed word ("non*s*teroidal", "Heath*r*ow": both parts words of
    three letters or more, or a prefix before), or it is a plural's "s" ending both
    ("NSAID*s*" / "drug*s*"). Not any letter: "CPA" is not "*c*opy of the *pa*ssport"."""
    if at == len(word) - 1 and rest == "s" and word.endswith("s"):
        return True
    head, tail = word[:at], word[at:]
    if len(tail) < 3 or _Dictionary.frequency(tail) == 0:
        return False
    return head in _PREFIXES or (len(head) >= 3 and _Dictionary.frequency(head) > 0)


def _numbers(toks: Sequence[_Tok]) -> Counter[tuple[str, str | None]]:
    return Counter((t.number, t.unit) for t in toks if t.number is not None and not t.used)


# units one converts exactly into another: the same amount written in other units
# ("half an hour" / "30 minutes", "1.5 kg" / "1500 g") is the same number
_CONVERSIONS: dict[str, tuple[str, float]] = {
    **{u: ("time", f) for u, f in (("ms", 0.001), ("s", 1), ("min", 60), ("h", 3600))},
    **{u: ("time", f) for u, f in (("day", 86400), ("week", 604800))},
    **{u: ("mass", f) for u, f in (("mg", 0.001), ("g", 1), ("kg", 1000))},
    **{u: ("length", f) for u, f in (("mm", 0.001), ("cm", 0.01), ("m", 1), ("km", 1000))},
    **{u: ("imperial length", f) for u, f in (("in", 1), ("ft", 12), ("yd", 36))},
    **{u: ("volume", f) for u, f in (("ml", 0.001), ("l", 1))},
    **{u: ("kitchen", f) for u, f in (("tsp", 1), ("tbsp", 3), ("cup", 48))},
    **{u: ("weight", f) for u, f in (("oz", 1), ("lb", 16))},
}


def _amounts(found: Counter[tuple[str, str | None]]) -> Counter[tuple[str, str | None]] | None:
    """The numbers with a convertible unit as one amount in that family's base unit;
    None when a number does not read as a value ("#2", an ordinal)."""
    out: Counter[tuple[str, str | None]] = Counter()
    for (n, unit), k in found.items():
        if unit in _CONVERSIONS:
            try:
                value = float(n)
            except ValueError:
                return None
            family, factor = _CONVERSIONS[unit]
            out[(_num(round(value * factor, 6)), family)] += k
        else:
            out[(n, unit)] += k
    return out


def _asks_in_units(toks: Sequence[_Tok]) -> bool:
    """A convertible unit named on its own ("how many *tablespoons* in 2 cups"): the
    question is the conversion, and its amounts are not interchangeable."""
    return any(
        t.number is None and not t.used and lx.UNITS.get(t.low) in _CONVERSIONS for t in toks
    )


def _compare_numbers(q: list[_Tok], c: list[_Tok]) -> list[Difference]:
    qn, cn = _numbers(q), _numbers(c)
    if qn == cn:
        return []
    qa, ca = _amounts(qn), _amounts(cn)
    if qa is not None and qa == ca and not _asks_in_units(q) and not _asks_in_units(c):
        return []
    qv = Counter(n for n, _ in qn.elements())
    cv = Counter(n for n, _ in cn.elements())
    # "one pound" / "a pound": a "1" the other side says with an article is the same
    _one_as_article(qv, cv, q, c)
    _one_as_article(cv, qv, c, q)
    if qv != cv:
        return [_diff("numbers", qv - cv, cv - qv)]
    # same values: units must agree where both texts give one
    qu = {n: u for n, u in qn if u is not None}
    cu = {n: u for n, u in cn if u is not None}
    clash = [(n, qu[n], cu[n]) for n in qu.keys() & cu.keys() if qu[n] != cu[n]]
    if clash:
        return [
            Difference(
                "numbers",
                " ".join(f"{n} {u}" for n, u, _ in clash),
                " ".join(f"{n} {u}" for n, _, u in clash),
                True,
            )
        ]
    return []


def _one_as_article(
    mine: Counter[str], other: Counter[str], toks: Sequence[_Tok], others: Sequence[_Tok]
) -> None:
    """Drop from ``mine`` the ones ("1", "one") that ``others`` says with an article
    more than ``toks`` does ("How many ounces in one pound?" / "... in a pound?")."""
    extra = mine["1"] - other["1"]
    if extra <= 0:
        return
    articles = sum(t.low in ("a", "an") for t in others) - sum(t.low in ("a", "an") for t in toks)
    drop = min(extra, articles)
    if drop > 0:
        mine["1"] -= drop
        if mine["1"] <= 0:
            del mine["1"]


def _diff(kind: str, q: Iterable[Any], c: Iterable[Any], refuses: bool = True) -> Difference:
    return Difference(kind, " ".join(map(str, q)), " ".join(map(str, c)), refuses)


def _temporal(toks: Sequence[_Tok]) -> frozenset[str]:
    return frozenset(t.temporal for t in toks if t.temporal) - lx.PRESENT


def _negations(toks: Sequence[_Tok]) -> int:
    return sum(1 for t in toks if t.low in lx.NEGATIONS)


_SUBJECT_DETERMINERS = frozenset("my your his her its our their the this that these those".split())


def _negation_head(toks: Sequence[_Tok], i: int) -> _Tok | None:
    """The word the negation at ``i`` bears on: the first content word after it, or in
    a question that puts the subject after the auxiliary ("Why won't *my laptop* turn
    on?") the last word of the run of content words after the subject's determiner."""
    head = next((u for u in toks[i + 1 : i + 5] if u.content), None)
    inverted = (
        i >= 1
        and toks[i - 1].low in _AUXILIARIES
        and (i == 1 or toks[i - 1].after_mark or toks[i - 2].low in lx.QUESTION_WORDS)
        and i + 1 < len(toks)
        and toks[i + 1].low in _SUBJECT_DETERMINERS
    )
    if inverted:
        run: list[_Tok] = []
        for u in toks[i + 2 :]:
            if not u.content or u.after_mark:
                break
            run.append(u)
        if len(run) >= 2:
            return run[-1]
    return head


def _negated(toks: Sequence[_Tok], key: dict[int, int]) -> Counter[int]:
    """The aligned words each negation bears on (:func:`_negation_head`)."""
    out: Counter[int] = Counter()
    for i, t in enumerate(toks):
        if t.low not in lx.NEGATIONS:
            continue
        head = _negation_head(toks, i)
        if head is not None and head.pos in key:
            out[key[head.pos]] += 1
    return out


def _negation_moved(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> list[Difference]:
    """As many negations on both sides, bearing on other words: "my car starts but the
    lights don't come on" / "my car won't start but the lights come on"."""
    if not _negations(q) or _negations(q) != _negations(c):
        return []
    nq = _negated(q, {i: i for i in pairs})
    nc = _negated(c, {j: i for i, j in pairs.items()})
    if sum(nq.values()) != sum(nc.values()) or nq == nc:
        return []
    moved_q = [q[i].text for i in nq - nc]
    moved_c = [q[i].text for i in nc - nq]
    return [_diff("negation", [f"not {w}" for w in moved_q], [f"not {w}" for w in moved_c])]


_FUTURE = frozenset({"will", "shall", "gonna"})
_PAST = frozenset({"did", "was", "were", "had", "has", "have", "used"})


def _tense(toks: Sequence[_Tok]) -> str:
    """``"future"`` / ``"past"`` when an auxiliary says so (will vs did/has/was)."""
    lows = {t.low for t in toks}
    if lows & _FUTURE:
        return "future"
    if lows & _PAST:
        return "past"
    return ""


def _questions(toks: Sequence[_Tok]) -> frozenset[str]:
    """The question words; "whom" after "by" asks for the doer, as "who" does ("*By
    whom* is my timesheet approved?" / "*Who* approves my timesheet?")."""
    return frozenset(
        "who" if t.low == "whom" and t.pos and toks[t.pos - 1].low == "by" else t.low
        for t in toks
        if t.low in lx.QUESTION_WORDS
    )


_AUXILIARIES = frozenset(
    "is are was were am do does did can could will would should shall may might must has "
    "have had".split()
)


def _asked(toks: Sequence[_Tok]) -> list[_Tok]:
    """The question's words: symbols and openers ("so", "ok", "please") left out."""
    return [t for t in toks if t.kind != "sym" and t.low not in lx.OPENERS]


def _opener(toks: Sequence[_Tok]) -> str:
    """How the question opens: ``"polar"`` (an auxiliary first: "Is plasma ...?"), else
    its first word ("why", "how", ...), openers like "so" and "ok" skipped."""
    for t in toks:
        if t.kind == "sym" or t.low in lx.OPENERS:
            continue
        return "polar" if t.low in _AUXILIARIES else t.low
    return ""


def _polar_against_wh(
    q: Sequence[_Tok], c: Sequence[_Tok], wq: frozenset[str], wc: frozenset[str]
) -> list[Difference]:
    """A yes/no question against one that opens with why/when/where/who asks another
    thing ("Is plasma the fourth state of matter?" / "Why is plasma ..."), and so does
    a question of manner against one of time, reason or person ("How do I find out?" /
    "When do I find out?"), unless the other side embeds that word ("Do you know why
    ...?")."""
    oq, oc = _opener(q), _opener(c)
    if oq == "polar" and oc in lx.QUESTION_WORDS and oc not in wq:
        return [_diff("question", ["yes/no"], [oc])]
    if oc == "polar" and oq in lx.QUESTION_WORDS and oq not in wc:
        return [_diff("question", [oq], ["yes/no"])]
    if _asks_manner(q) and oc in _NOT_MANNER and oc not in wq:
        return [_diff("question", ["how"], [oc])]
    if _asks_manner(c) and oq in _NOT_MANNER and oq not in wc:
        return [_diff("question", [oq], ["how"])]
    return []


#: Openers that never ask for a way: "How do I find out?" / "When do I find out?"
#: ("where" is left out: "Where can I find my key?" asks the way to it as often)
_NOT_MANNER = frozenset({"when", "why", "who", "whom"})


def _asks_manner(toks: Sequence[_Tok]) -> bool:
    """A bare "how", an auxiliary and the asker ("How do I ...", "How can we ..."): a
    question of the way to do something, not of amount, time or length ("how much",
    "how long") nor an explanation ("How does helium change your voice?", asked as
    often as "why"); or a "what" that names the steps or the process (:data:`_PROCESS`).
    Embedded after a request or not knowing, "how" and the asker or "to" ask the way."""
    words = _asked(toks)
    if words and words[0].low == "what":  # "What steps do I take to ...", "What's the process"
        return any(t.low in _PROCESS for t in words[1:4])
    if len(words) >= 3 and words[0].low == "how" and words[1].low in _ASKERS | {"to"}:
        return True  # embedded, after "Can you tell me": "how I find out", "how to apply"
    if len(words) < 3 or words[0].low != "how" or words[1].low not in _AUXILIARIES:
        return False
    if words[2].low in _ASKERS:
        return True
    if len(words) < 4:
        return False
    # "How can *a student* appeal ...", "How should *tenants* report ...": what someone
    # may or should do is a way, not an explanation (as "How does helium ..." is)
    named = words[2].low in _ARTICLES or words[2].low in _POSSESSIVES or words[2].content
    return words[1].low in _MANNER_MODALS and named and words[2].low not in _ANAPHORS


# who asks how to do something: "How do I ...", "How can we ...", "How should one ..."
_ASKERS = frozenset({"i", "we", "you", "one"})
_MANNER_MODALS = frozenset("can could should may might must".split())


def _align(q: list[_Tok], c: list[_Tok]) -> tuple[dict[int, int], list[Difference]]:
    """Match content words (and any leftover word a typo can reach) from q to c.

    Passes from the surest to the loosest: same lemma, synonym, spelling, abbreviation, a
    WordNet synonym (``lexical``), derived form, typo; a word matched by one pass is out
    of the later ones.
    """
    pairs: dict[int, int] = {}
    notes: list[Difference] = []
    taken: set[int] = set()
    qs = [x for x in q if not x.used and x.kind != "sym"]
    cs = [y for y in c if not y.used and y.kind != "sym"]
    passes = ("exact", "same", "synonym", "spelling", "abbreviation", "lexical", "derived", "typo")
    for how in passes:
        for x in qs:
            if x.pos in pairs:
                continue
            for y in cs:
                if y.pos in taken:
                    continue
                if how == "abbreviation":
                    if not (x.content and y.content):
                        continue
                elif how != "typo":
                    if x.content != y.content or (how == "derived" and not x.content):
                        continue
                elif not (x.content or y.content) or abs(len(x.low) - len(y.low)) > 2:
                    continue
                if _matches(x, y, how):
                    pairs[x.pos] = y.pos
                    taken.add(y.pos)
                    if how not in ("same", "exact"):
                        kind = {"spelling": "typo", "abbreviation": "acronym"}.get(how, how)
                        notes.append(Difference(kind, x.text, y.text, False))
                    break
        if len(pairs) == len(qs) or len(taken) == len(cs):
            break
    return pairs, notes


_RELATIONS = frozenset({"than", "to", "into", "onto", "from", "over"})


def _swapped(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> Difference | None:
    """Arguments exchanged around a relation that stayed in place.

    Around a relational word (``than``, ``to``, ``into``, ``onto``, ``from``, ``over``):
    the first argument after it in one text stands before it in the other, and vice
    versa ("convert PDF to Word" / "convert Word to PDF", "rebase main onto my branch" /
    "rebase my branch onto main", "Is 0.3 greater than 0.1 + 0.2"). Around any other word
    ("Brazil beat Germany" / "Germany beat Brazil"): only when both texts hold the very
    same content words, two of them traded places across a shared word, and no passive
    voice ("by") explains it. Symmetric connectors (or, and, vs, between) never count.
    """
    count_q = Counter(t.low for t in q)
    count_c = Counter(t.low for t in c)
    around = _relation_swap(q, c, pairs, count_q, count_c)
    if around is not None:
        return around
    # a pure permutation of the same content words: X beat Y / Y beat X
    content_q = Counter(sorted(t.lemmas)[0] for t in q if t.content)
    content_c = Counter(sorted(t.lemmas)[0] for t in c if t.content)
    if content_q != content_c or count_q["by"] != count_c["by"]:
        return None
    return _permuted(q, c, pairs)


def _relation_swap(
    q: list[_Tok],
    c: list[_Tok],
    pairs: dict[int, int],
    count_q: Counter[str],
    count_c: Counter[str],
) -> Difference | None:
    """Arguments exchanged around a relational word of :data:`_RELATIONS` (see
    :func:`_swapped`)."""
    inv = {j: i for i, j in pairs.items()}

    def key(t: _Tok, on_q: bool) -> str | None:
        if t.number is not None and not t.used:
            return "#" + t.number
        if not t.content:
            return None
        if on_q:
            return f"q{t.pos}"
        i = inv.get(t.pos)
        return f"q{i}" if i is not None else f"c{t.pos}"

    def relation_args(toks: list[_Tok], at: int, on_q: bool) -> tuple[str | None, set[str]]:
        right = next((k for t in toks[at + 1 :] if (k := key(t, on_q)) is not None), None)
        left = {k for t in toks[:at] if (k := key(t, on_q)) is not None}
        return right, left

    seen: Counter[str] = Counter()
    for t in q:
        if t.low not in _RELATIONS or count_q[t.low] != count_c[t.low]:
            continue
        nth = seen[t.low]
        seen[t.low] += 1
        u = [x for x in c if x.low == t.low][nth]
        rq, lq = relation_args(q, t.pos, True)
        rc, lc = relation_args(c, u.pos, False)
        if rq is not None and rc is not None and rq != rc and rq in lc and rc in lq:
            return Difference(
                "order", f"… {t.text} {_show(q, rq)}", f"… {u.text} {_show(q, rc)}", True
            )
    return None


_HEAD_SKIP = frozenset({"the", "a", "an", "my", "your", "our", "their", "his", "her", "its"})


def _head(toks: list[_Tok], i: int) -> str:
    """The function word that introduces the word at ``i`` ("in [the] EU", "if [my]
    flight"), or "" when a content word or the start comes first."""
    j = i - 1
    while j >= 0 and toks[j].low in _HEAD_SKIP:
        j -= 1
    return toks[j].low if j >= 0 and not toks[j].content else ""


def _permuted(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> Difference | None:
    """Two aligned content words that traded places across a shared one, with no
    symmetric connector between them (see :func:`_swapped`). Two phrases that moved
    whole, each still introduced by the same function word ("In the EU, am I entitled
    ... if my flight is delayed?" / "If my flight is delayed, am I entitled ... in the
    EU?"), are a reordering, not a swap."""
    args = sorted((i, j) for i, j in pairs.items() if q[i].content)
    for k, (a_q, a_c) in enumerate(args):
        for b_q, b_c in args[k + 1 :]:
            if a_c < b_c:
                continue
            ha, hb = _head(q, a_q), _head(q, b_q)
            if ha and hb and ha == _head(c, a_c) and hb == _head(c, b_c):
                continue
            for p_q, p_c in args:
                if a_q < p_q < b_q and b_c < p_c < a_c:
                    if any(x.low in lx.SYMMETRIC for x in q[a_q:b_q]):
                        continue
                    return Difference(
                        "order",
                        f"{q[a_q].text} {q[p_q].text} {q[b_q].text}",
                        f"{c[b_c].text} {c[p_c].text} {c[a_c].text}",
                        True,
                    )
    return None


def _show(q: list[_Tok], key: str) -> str:
    if key.startswith("q") and key[1:].isdigit():
        return q[int(key[1:])].text
    return key.lstrip("#c")


def _uncapitalized(text: str) -> str:
    """``text`` lower-cased when nearly all its letters are capitals ("HOW DO I RESET MY
    PASSWORD"), else unchanged."""
    words = (w for w in re.findall(r"[^\W\d_]+", text) if w.lower() not in _COURTESY)
    letters = [ch for w in words for ch in w]  # "WHAT IS X thx": the thanks aside
    if len(letters) >= 8 and sum(ch.isupper() for ch in letters) >= 0.9 * len(letters):
        return text.lower()
    return text


def shared_ends(a: str, b: str) -> tuple[int, int]:
    """Lengths of the longest common prefix and (not overlapping it) suffix of ``a``
    and ``b``: a binary search of slice comparisons, O(n log n) in C."""
    most = min(len(a), len(b))
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, most - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return prefix, lo


def _window(query: str, candidate: str) -> tuple[str, str] | None:
    """The parts of two long texts to analyze (see :data:`MAX_ANALYZED_CHARS`); None:
    they differ over more than that."""
    prefix, suffix = shared_ends(query, candidate)
    start = max(0, prefix - _WINDOW_CONTEXT)
    while start > 0 and not query[start - 1].isspace():  # a whole word (shared text)
        start -= 1
    drop = max(0, suffix - _WINDOW_CONTEXT)
    while drop > 0 and not query[len(query) - drop].isspace():
        drop -= 1
    q, c = query[start : len(query) - drop], candidate[start : len(candidate) - drop]
    if len(q) > MAX_ANALYZED_CHARS or len(c) > MAX_ANALYZED_CHARS:
        return None
    return q, c


def analyze(query: str, candidate: str, *, case_sensitive: bool = False) -> Analysis:
    """Compare a query with a stored question; see the module docstring.

    The cost is bounded whatever the sizes: texts longer than :data:`MAX_ANALYZED_CHARS`
    are compared outside the region where they differ by equality, and refused
    (``length``) when that region is longer than the bound.

    Args:
        query: the new question, as the user wrote it.
        candidate: the stored question a semantic search found.
        case_sensitive: refuse texts that differ only in letter case (code namespaces).

    Returns:
        An :class:`Analysis`; ``analysis.reason`` is ``""`` when nothing refuses.

    Example:
        >>> analyze("What is the weather in Paris tomorrow?",
        ...         "What is the weather in Paris today?").reason
        'temporal'
    """
    if len(query) > MAX_ANALYZED_CHARS or len(candidate) > MAX_ANALYZED_CHARS:
        window = _window(query, candidate)
        if window is None:
            refusal = Difference(
                "length", f"{len(query)} characters", f"{len(candidate)} characters", True
            )
            return Analysis(query, candidate, (refusal,))
        found = _analyze(*window, case_sensitive=case_sensitive)
        return Analysis(
            query,
            candidate,
            found.differences,
            found.equivalent,
            found.shared,
            found.synonymous,
            found.reworded,
        )
    return _analyze(query, candidate, case_sensitive=case_sensitive)


def _analyze(query: str, candidate: str, *, case_sensitive: bool) -> Analysis:
    if case_sensitive:
        qs, cs = " ".join(query.split()), " ".join(candidate.split())
        if qs != cs and qs.casefold() == cs.casefold():
            return Analysis(query, candidate, (Difference("case", qs, cs, True),))
    if not case_sensitive:  # a question in capitals: its capitals say nothing of names
        query, candidate = _uncapitalized(query), _uncapitalized(candidate)
    q, c, pairs, notes = _read_aligned(query, candidate)
    diffs = _surface_differences(q, c)
    diffs += notes
    matched_c = set(pairs.values())
    left_q = [t for t in q if t.pos not in pairs and not t.used and t.kind != "sym"]
    left_c = [t for t in c if t.pos not in matched_c and not t.used and t.kind != "sym"]
    left_q, left_c, repeats = _without_repeats(q, c, left_q, left_c)
    if repeats:
        diffs.append(Difference("repeat", " ".join(t.text for t in repeats), "", False))
    left_q, left_c, unit, units = _without_units(q, c, pairs, left_q, left_c)
    diffs += unit

    diffs += _unmatched_differences(q, c, left_q, left_c)
    diffs += _direction_differences(q, c, left_q, left_c, pairs)
    diffs += _negation_moved(q, c, pairs) + _requests_added(q, c, pairs)
    diffs += _clause_doer(q, c, pairs)

    wished = _wish_frame(q, c, pairs)  # "I'm *trying* to ..." / "How do I ...?"
    uq, uc = _unmatched_content(left_q, left_c, wished or _steps_frame(q, c))
    shared = sum(1 for i in pairs if q[i].content)
    frame = _asked_frame(q, c, uq, uc, pairs)  # "How tall is X?" / "What is the height of X?"
    if frame is not None:
        diffs.append(frame)
        uq, uc = [], []
    if not any(d.refuses for d in diffs) and frame is None:
        diffs += _unexplained(q, c, (left_q, left_c), (set(pairs), matched_c), (uq, uc))
    aside = _preamble(q) | _preamble(c)  # "Hi! Quick question - ...": said to no end
    left_q, left_c = ([t for t in side if id(t) not in aside] for side in (left_q, left_c))
    said = [t for t in left_q + left_c if t.content and t.low in lx.FILLER]
    if said:
        diffs.append(Difference("filler", " ".join(t.text for t in said), "", False))
    equivalent = not (uq or uc or said or repeats or units)
    equivalent = equivalent and _same_words(q, c, diffs, left_q, left_c)
    # a WordNet synonym holds for some sense of each word, not surely this one: the pair
    # is "synonymous", left to the similarity and the model check
    lexical = any(d.kind == "lexical" for d in diffs)
    order = {r: i for i, r in enumerate(REASONS)}
    diffs.sort(key=lambda d: (not d.refuses, order.get(d.kind, len(order))))
    same = equivalent and shared > 0
    blocked = same or lexical or uq or uc or repeats or any(d.refuses for d in diffs)
    reworded = not blocked and shared >= 2
    reworded = reworded and (wished is not None or _reframed(q, c, pairs, (left_q, left_c), frame))
    read = _read_as(q, c, diffs, aside | units | {id(t) for t in said})
    found = (tuple(diffs), same and not lexical, shared, same and lexical, reworded, read)
    return Analysis(query, candidate, *found, _asked_texts(q, c))


def _read_aligned(
    query: str, candidate: str
) -> tuple[list[_Tok], list[_Tok], dict[int, int], list[Difference]]:
    """Both texts' tokens (an apology for asking and the asker's not knowing left out,
    ordinals read against the other side) and their alignment (:func:`_align`). A
    phrase merged on one side and left alone, its first word on the other side, is read
    word by word on both: "open an account" / "open an acct" (an abbreviation), "open
    an acount" (a typo)."""

    def read(unmerged: frozenset[str]) -> tuple[list[_Tok], list[_Tok]]:
        q, c = (_question_part(_tokenize(text, unmerged)) for text in (query, candidate))
        _ordinals_read(q, c)
        return q, c

    q, c = read(frozenset())
    pairs, notes = _align(q, c)
    alone = frozenset(
        t.low
        for side, seen, other in ((q, set(pairs), c), (c, set(pairs.values()), q))
        for t in side
        if t.parts and t.pos not in seen and any(u.low == t.parts[0] for u in other)
    )
    if alone:
        q, c = read(alone)
        pairs, notes = _align(q, c)
    fixed = _misspelled(q, c, pairs, (query, candidate))
    if fixed:  # "What's the process for rqeuesting time off?": read "requesting"
        texts = (query, candidate)
        query, candidate = (_respelled_words(text, fixed) for text in texts)
        rq, rc = read(alone)
        rpairs, rnotes = _align(rq, rc)
        aligned = {rq[i].low for i in rpairs} | {rc[j].low for j in rpairs.values()}
        kept = {word: better for word, better in fixed.items() if better in aligned}
        if kept != fixed:  # a respelling that aligns nothing is a guess: the words as written
            query, candidate = (_respelled_words(text, kept) for text in texts)
            rq, rc = read(alone)
            rpairs, rnotes = _align(rq, rc)
        if kept:
            q, c, pairs = rq, rc, rpairs
            notes = rnotes + [Difference("typo", w, better, False) for w, better in kept.items()]
            q[0].cut = c[0].cut = True
    return q, c, pairs, notes


def _misspelled(
    q: list[_Tok], c: list[_Tok], pairs: dict[int, int], texts: tuple[str, str]
) -> dict[str, str]:
    """The words left unaligned that the dictionary lacks, each to its likeliest
    respelling against the other text (:func:`agent_cache._respell.respelling`: a word of
    the other text one edit away first): "rqeuesting" / "request", "dferost" / "thaw"
    ("defrost", then a synonym). The other passes matched every typo they could reach;
    a respelling that lands on another word is a difference like any other."""
    from agent_cache._respell import respelling, words_of  # they read this module's dictionary

    out: dict[str, str] = {}
    for side, seen, near in ((q, set(pairs), texts[1]), (c, set(pairs.values()), texts[0])):
        theirs: frozenset[str] | None = None
        for t in side:
            if t.pos in seen or t.kind != "word" or not t.text.islower() or not t.low.isalpha():
                continue
            theirs = words_of(near) if theirs is None else theirs
            better = respelling(t.low, near, theirs)
            if better is not None and better != t.low:
                out[t.text] = better
    return out


def _respelled_words(text: str, fixed: dict[str, str]) -> str:
    """``text`` with the words of ``fixed`` respelled (whole words only)."""
    if not fixed:
        return text
    words = "|".join(map(re.escape, sorted(fixed, key=len)[::-1]))
    pattern = r"(?<![\w'’-])(" + words + r")(?![\w'’-])"
    return re.sub(pattern, lambda m: fixed[m.group(1)], text)


def _unmatched_content(
    left_q: list[_Tok], left_c: list[_Tok], framed: set[int]
) -> tuple[list[_Tok], list[_Tok]]:
    """The content words left unmatched on each side, filler and the words of a frame
    around the act (``framed``: "I'm *trying* to ...", "What *steps* should I *take* to
    ...?" against "How do I ...?") left out."""
    q, c = (
        [t for t in left if t.content and t.low not in lx.FILLER and id(t) not in framed]
        for left in (left_q, left_c)
    )
    return q, c


def _reframed(
    q: list[_Tok],
    c: list[_Tok],
    pairs: dict[int, int],
    left: tuple[list[_Tok], list[_Tok]],
    frame: Difference | None,
) -> bool:
    """The same words asked in another frame: a duration or an attribute
    (:func:`_asked_frame`), a verb as its noun, a process against "how do I", the
    voice changed, a request to be told a thing, the way asked in the passive (what the
    asker means to do, :func:`_wish_frame`, is read once by the caller)."""
    return (
        frame is not None
        or _nominalization_frame(q, c, pairs)
        or _process_frame(q, c, left[0], left[1])
        or _voice_reframed(q, c, pairs)
        or _told_frame(q, c)
        or _way_passive(q, c, pairs)
    )


_CLAUSE_OPENERS = frozenset({"if", "whether", "that"})


def _told_frame(q: list[_Tok], c: list[_Tok]) -> bool:
    """A request to be told a thing ("Could you tell me the store hours on Sunday?",
    "Please let me know your return policy") against "What is / are ...?" of it; not a
    request of an embedded question ("tell me how ...", judged as that question)."""
    for one, other in ((q, c), (c, q)):
        words = [t.low for t in _asked(other)]
        if words[:2] not in (["what", "is"], ["what", "are"]):
            continue
        said = [t.low for t in one if t.kind != "sym"]
        for i in range(len(said) - 2):
            told = said[i] == "tell" and said[i + 1] in ("me", "us")
            known = said[i : i + 3] == ["let", "me", "know"]
            # not an embedded question or clause after it: judged as that
            if (told or known) and said[i + 2] not in _QUESTION_START | _CLAUSE_OPENERS:
                return True
    return False


# who asks the way of an act in the active voice: the asker, or anyone
_GENERIC_DOERS = _ASKERS | {"people"}
# a person the act is done to or for: a passive holding one says who, not how
_OBJECT_PRONOUNS = frozenset("me us you him her them".split())
_HOW_AUXILIARIES = frozenset("do does can could".split())
# "How *should* I store insulin?": every modal after a bare "how" asks the way
_WAY_AUXILIARIES = _HOW_AUXILIARIES | frozenset("should would".split())


def _way_passive(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> bool:
    """The way of an act asked by its doer on one side and in the passive, with no
    doer, on the other: "How do I reset my router?" / "How can a router be reset?",
    "How do you cook rice?" / "How is rice cooked?". The verb is the participle's
    own word; a passive that names who does it ("... cancelled *by the seller*") or
    whom it is done to ("reported *to me*") says more, and "When is ..." or "Was the
    package delivered?" leave the doer open."""
    for one, other, index in ((q, c, pairs), (c, q, {j: i for i, j in pairs.items()})):
        active, passive = _asked(one), _asked(other)
        if len(active) < 4 or len(passive) < 3:
            continue
        if active[0].low != "how" or passive[0].low != "how":
            continue
        if active[1].low not in _HOW_AUXILIARIES or active[2].low not in _GENERIC_DOERS:
            continue
        verb = active[3]
        if verb.pos not in index or not any(t.low in _BE for t in passive[1:]):
            continue
        participle = other[index[verb.pos]]
        if participle.low == verb.low:  # "reset", "cut": a passive only after "be"
            aux = passive[1].low
            if not (aux in _BE or (aux in ("can", "could") and "be" in (t.low for t in passive))):
                continue
        elif not _past_form(participle.low):
            continue
        if any(t.low == "by" or t.low in _OBJECT_PRONOUNS for t in passive):
            continue
        return True
    return False


# what the asker says they mean to do, before "to" and the act: "I *want* to", "I'd
# *like* to", "I'm *trying* to", "*looking* to", "we *need* to"
_WISHES = frozenset("want need like trying looking wish hoping".split())
_WISH_GLUE = frozenset("am would really just".split())


def _steps_frame(q: list[_Tok], c: list[_Tok]) -> set[int]:
    """The ids of the frame's words when one side asks the steps to a goal ("What steps
    should I take to ...?", :func:`_steps_taken`) and the other "How do I ...?" or "Is
    there a way to ...?"."""
    for one, other in ((q, c), (c, q)):
        if (_opener(other) == "how" and _asks_manner(other)) or _asks_for_a_way(other):
            found = _steps_taken(one)
            if found:
                return found
    return set()


# words a request to be told the way may hold before "how to": "Can you *explain* how
# to ...", "Could someone *show* me how to ...", "*Wondering* how to ...", "*Any idea*
# how to ..."
_TELLING = frozenset(
    """explain tell show teach know idea clue wondering wonder forgot forget remind
    someone somebody anyone anybody you me us i can could would will please any do does
    kindly""".split()
)
_WAY_TO = frozenset({"way", "ways"})


def _wished_act(toks: list[_Tok]) -> tuple[set[int], _Tok] | None:
    """(the ids of the frame's words, the act) of a statement of intent or a request to
    be told a way: "I'd *like* to *cancel* my order", "*trying* to *reset* my password",
    "Can you help me *change* my email?", "Can you *explain* how to *reset* ...",
    "What's the best way to *reset* ...", "Is there a way I can *reset* ..."; or None."""
    words = _asked(toks)
    low = [t.low for t in words]
    k = 1 if low[:1] in (["i"], ["we"]) else 0
    while k < len(low) and low[k] in _WISH_GLUE:
        k += 1
    if k + 2 < len(low) and low[k] in _WISHES and low[k + 1] == "to":
        return ({id(words[k])}, words[k + 2]) if (k or low[k] != "like") else None
    helped = next(
        (x for x in range(min(4, len(low) - 2)) if low[x : x + 2] == ["help", "me"]), None
    )
    if helped is not None and low[:helped] in ([], ["can", "you"], ["could", "you"], ["please"]):
        return set(), words[helped + 2]
    how = next((x for x in range(min(7, len(low) - 2)) if low[x : x + 2] == ["how", "to"]), None)
    if how is not None and all(w in _TELLING for w in low[:how]):
        return {id(t) for t in words[:how]}, words[how + 2]
    way = next((x for x in range(1, min(7, len(low) - 2)) if low[x] in _WAY_TO), None)
    if way is None:
        return None
    before, after = low[:way], low[way + 1 : way + 4]
    if before[:1] == ["what"] and all(t.low in lx.FILLER or not t.content for t in words[1:way]):
        return (set(), words[way + 2]) if after[:1] == ["to"] else None
    if before in (["is", "there", "a"], ["is", "there", "any"]):
        if after[:1] == ["to"]:
            return set(), words[way + 2]
        if after[:2] in (["i", "can"], ["we", "can"]) and len(after) == 3:
            return set(), words[way + 3]
    return None


def _asked_act(toks: list[_Tok]) -> _Tok | None:
    """The act a "how do I ...?" question asks the way of ("How do I *cancel* ...",
    "how to *reset* ..."), or None."""
    words = _asked(toks)
    low = [t.low for t in words]
    if low[:2] == ["how", "to"] and len(low) > 2:
        return words[2]
    if len(low) > 3 and low[0] == "how" and low[1] in _WAY_AUXILIARIES:
        return words[3] if low[2] in ("i", "we") else None
    return None


def _wish_frame(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> set[int] | None:
    """What the asker means to do said as a statement on one side ("I'd like to cancel
    my order", "trying to reset my password", "Can you help me change my email?"), its
    way asked on the other ("How do I cancel my order?"): the same act, the same
    answer. The ids of the word of intent (said to no end beside the question), or None
    when there is no such pair; the two acts must be one word aligned."""
    for one, other, index in ((q, c, pairs), (c, q, {j: i for i, j in pairs.items()})):
        wished, asked = _wished_act(one), _asked_act(other)
        if wished is not None and asked is not None and index.get(wished[1].pos) == asked.pos:
            return wished[0]
    return None


def _aligned_forms(q: list[_Tok], pairs: dict[int, int]) -> dict[int, str]:
    """The key of each aligned query word for :mod:`agent_cache._moves`: its lemma, or
    the word as written where two aligned words share a lemma ("https" / "http": the
    lemma tables read one as the other's plural, and their order would not count)."""
    form = {i: min(q[i].lemmas) if q[i].lemmas else q[i].low for i in pairs}
    written: dict[str, set[str]] = {}
    for i, f in form.items():
        written.setdefault(f, set()).add(q[i].low)
    return {i: q[i].low if len(written[f]) > 1 else f for i, f in form.items()}


def _voice_reframed(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> bool:
    """One side passive with its agent named after "by", the other active with that
    agent before the verb: "Why was my pod evicted *by the kubelet*?" / "Why did *the
    kubelet* evict my pod?". A passive with no agent ("Was the package delivered?" /
    "Did I deliver the package?") leaves the doer open: not this frame."""
    if not any(t.low == "by" for t in (*q, *c)):
        return False  # no agent named: skip building the two sides
    form = _aligned_forms(q, pairs)
    sq, kq = _move_side(q, form)
    sc, kc = _move_side(c, {j: form[i] for i, j in pairs.items()})
    found = _passive(sq, kq, q) or _passive(sc, kc, c)
    voice = _voice((sq, kq, q), (sc, kc, c))
    return found is not None and found[1] is not None and voice == "changed"


def _same_words(
    q: list[_Tok], c: list[_Tok], diffs: list[Difference], left_q: list[_Tok], left_c: list[_Tok]
) -> bool:
    """The same words, up to typos, inflection, synonyms and acronyms, once unmatched
    content words are ruled out: a derived form or a changed function word is a
    rewording, judged by similarity."""
    return (
        not any(d.refuses for d in diffs)
        and _function_words(left_q) == _function_words(left_c)
        and not any(d.kind == "derived" for d in diffs)
        and _tense(q) == _tense(c)  # "were" aligns with "are" (one lemma): a rewording
    )


# explained differences the embedder may read in the candidate's words
_RESPELLED = frozenset({"typo", "synonym", "acronym"})


def _asked_texts(q: list[_Tok], c: list[_Tok]) -> tuple[str, str]:
    """The two questions as asked, when something was read past or respelled (thanks,
    a greeting, an apology: "Hi team, how can I eliminate fruit flies?" asks "how can I
    eliminate fruit flies?"); ("", "") when both read as written."""
    if not any(t.cut for t in (*q, *c)):
        return ("", "")
    return (" ".join(t.text for t in q), " ".join(t.text for t in c))


def _read_as(
    q: list[_Tok], c: list[_Tok], diffs: list[Difference], dropped: set[int]
) -> tuple[str, str]:
    """The two texts as the analysis reads them: typos and synonyms in the candidate's
    words, acronyms spelled out, fillers and a greeting left out ("hey quick question how
    do i resett my pasword" reads "how do i reset my password"). Empty when a difference
    refuses or nothing reads otherwise than written."""
    if any(d.refuses for d in diffs):
        return ("", "")
    respelled: dict[str, str] = {}  # the query's word -> the candidate's
    spelled: dict[str, str] = {}  # an acronym, on either side -> its words
    for d in diffs:
        if d.kind in _RESPELLED and d.query and d.candidate and " " not in d.query:
            respelled[d.query.lower()] = d.candidate
        if d.kind == "acronym":
            short, long = sorted((d.query, d.candidate), key=len)
            if " " not in short:
                spelled[short.lower()] = long
    read: list[list[str]] = [[], []]
    changed = False
    for side, (toks, words) in enumerate(((q, {**respelled, **spelled}), (c, spelled))):
        for t in toks:
            word = words.get(t.low, t.text)
            changed = changed or id(t) in dropped or word.lower() != t.low or t.cut
            if id(t) not in dropped:
                read[side].append(word)
    return (" ".join(read[0]), " ".join(read[1])) if changed else ("", "")


_QUESTION_START = lx.QUESTION_WORDS | {"how", "what", "which"}
_CLAUSE_START = _QUESTION_START | _AUXILIARIES  # where a question begins
# greetings and discourse markers, a closed class: "hey there quick question how do I"
_DISCOURSE = lx.OPENERS | {"there", "quick", "question", "thanks", "thank", "you", "again"}


# ordinals that are also other words ("second" a unit of time, "first" an adverb): read
# as numbers only against the other side's digits
_ORDINAL_WORDS = {"first": "#1", "second": "#2"}
# the words an ordinal that counts a noun comes after
_COUNTED_AFTER = frozenset("a an the my your our their his her its this that".split())


def _ordinals_read(q: list[_Tok], c: list[_Tok]) -> None:
    """Read "first" / "second" as the ordinal where the other side writes it in digits
    and does not also write the word: "the 1st step" / "the first step", "a 2nd-floor
    office" / "a second-floor office"; and where the other side lacks the word and it
    stands between a determiner and the noun it counts: "a *second* admin", "my *first*
    payment" (not "wait a second", "first, ...")."""
    for one, other in ((q, c), (c, q)):
        digits = {t.number for t in other if t.kind == "num" and t.number}
        words = {t.low for t in other}
        for k, t in enumerate(one):
            n = _ORDINAL_WORDS.get(t.low)
            if n is None or t.number is not None or t.low in words:
                continue
            counted = (
                0 < k < len(one) - 1
                and one[k - 1].low in _COUNTED_AFTER
                and one[k + 1].content
                and not one[k + 1].after_mark
            )
            if n in digits or counted:
                t.number = n


def _renumbered(rest: list[_Tok]) -> list[_Tok]:
    """The tokens after a part read past (an apology, not knowing), numbered from 0; the
    first marked :attr:`_Tok.cut` (the text reads otherwise than written)."""
    for i, u in enumerate(rest):
        u.pos = i
    if rest:
        rest[0].cut = True
    return rest


# words that open an apology for asking ("Sorry to bother you, but ...", "Apologies if
# this is obvious - ...", "Forgive me if this was asked before, ...")
_APOLOGY = frozenset("sorry apologies apology apologize apologise excuse pardon forgive".split())
# words that name what the apology is about: a topic of the question
_TOPIC = frozenset("about regarding re concerning on".split())
# the longest apology read as one: past it, the words may say something of the question
_APOLOGY_WORDS = 12


# a word that says the asker does not know what the question after it asks: "I don't
# *know* how to ...", "I'm not *sure* where ...", "I have no *idea* why ..."
_KNOWING = frozenset("know sure certain idea clue understand remember find figure tell see".split())
# what may stand between the asker and that word: auxiliaries, a negation, a hedge
_NOT_KNOWING_GLUE = frozenset(
    "do does did not no can cannot could am was have has really honestly just still quite "
    "even totally completely any".split()
)
_EMBEDDED = frozenset("how where when why what which who whom whether if".split())


def _past_not_knowing(toks: list[_Tok]) -> list[_Tok]:
    """The embedded question after the asker's saying they do not know it, renumbered;
    all the tokens when there is none: "I don't know how to export my data" reads "how
    to export my data", "I can't figure out where to ...", "I'm not sure why ...", "I
    have no idea when ...". Before the question word: the asker ("I", "we"),
    auxiliaries and a negation, one word of knowing (:data:`_KNOWING`) and its particle
    ("figure *out*"). "I can't export my data" and "I don't want to ..." are no such
    frame: the negation is the question's."""
    words = [i for i, t in enumerate(toks) if t.kind != "sym" and t.low not in lx.OPENERS]
    if len(words) < 4 or toks[words[0]].low not in ("i", "we"):
        return toks
    negated, knowing = False, False
    for k in words[1:8]:
        t = toks[k]
        if knowing and t.low in _EMBEDDED:
            return _renumbered(toks[k:]) if negated else toks
        if t.low in _KNOWING and not knowing:
            knowing = True
        elif knowing and t.low == "out":  # "figure out", "find out"
            continue
        elif t.low in _NOT_KNOWING_GLUE and not knowing:
            negated = negated or t.low in lx.NEGATIONS
        else:
            return toks
    return toks


# the courtesy said around a question, a closed class: greetings, good wishes, thanks,
# an apology for asking and the announcing of a question. A phrase made of these words
# (and function words) and holding one of the first set says nothing of the question.
_COURTESY_MARKS = frozenset(
    "hello hi hey dear greetings morning afternoon evening hope hoping hopefully thank "
    "thanks thx appreciate appreciated grateful cheers sorry apologies question questions "
    "q faq curious wondering wonder help advise urgent".split()
)
_COURTESY = _COURTESY_MARKS | frozenset(
    "well great good nice wonderful lovely fine all everything everyone folks team support "
    "there message finds find doing going having day week weekend today help helping "
    "assistance advance earlier time patience getting back quickly reply response again "
    "much lot greatly truly really very so kindly any thing one more quick bother "
    "trouble".split()
)
# the longest phrase read as courtesy: a longer one says more
_COURTESY_WORDS = 16
# words after which a name is the person addressed ("Hi Sam,", "Dear Anna,")
_ADDRESSING = frozenset("hello hi hey dear thanks".split())


def _courteous(phrase: Sequence[_Tok]) -> bool:
    """Whether a phrase is courtesy and nothing else ("Hi there, hope you're having a
    great day!", "Thanks in advance for your help.", "One more question:"): every word a
    function word or one of :data:`_COURTESY`, one of :data:`_COURTESY_MARKS` among
    them, a name only right after a greeting; no number, time, negation or question
    word of its own."""
    words = [t for t in phrase if t.kind != "sym"]
    if not words or len(words) > _COURTESY_WORDS:
        return False
    marked = False
    for k, t in enumerate(words):
        if t.low in _COURTESY:
            marked = marked or t.low in _COURTESY_MARKS
            continue
        if t.entity and k and words[k - 1].low in _ADDRESSING:
            continue
        if (
            t.content
            or t.entity
            or t.number is not None
            or t.temporal is not None
            or t.low in lx.NEGATIONS
            or t.low in _QUESTION_START
        ):
            return False
    return marked


# a word that asks to be told what the question after it asks: "Can you *tell* me
# where ...", "Do you *know* when ...", "I'd like to *know* how ...", "*Explain* why ..."
_TELLING_VERBS = frozenset("tell show explain know remind wondering wonder".split())
# what may stand around it: the one asked, a modal, the asker's wish, courtesy, the asker
_TELLING_GLUE = frozenset(
    "can could would will do does did you someone somebody anyone anybody i we am was "
    "please kindly just happen happens to me us like want wanted need needed let".split()
)


def _past_being_told(toks: list[_Tok]) -> list[_Tok]:
    """The embedded question after a request to be told it, renumbered; all the tokens
    when there is none: "Can you tell me when my refund will be processed?" reads "when
    my refund will be processed", "Do you know where I can download my invoice?", "I
    want to know how ...", "Could someone explain why ...". Before the question word:
    only the one asked, a modal, the asker's wish and one verb of telling or knowing
    (:data:`_TELLING_VERBS`); "Can you tell me the hours?" embeds no question, and "I
    don't know how ..." is :func:`_past_not_knowing`'s."""
    words = [i for i, t in enumerate(toks) if t.kind != "sym" and t.low not in lx.OPENERS]
    if len(words) < 4:
        return toks
    telling = False
    for k in words[:8]:
        t = toks[k]
        if telling and t.low.split()[0] in _EMBEDDED:
            return _renumbered(toks[k:])
        if t.low in _TELLING_VERBS:
            telling = True
        elif t.low not in _TELLING_GLUE:
            return toks
    return toks


def _question_part(toks: list[_Tok]) -> list[_Tok]:
    """The tokens of the question itself: past thanks, courtesy, a greeting, an apology
    for asking, the asker's not knowing and a request to be told, renumbered."""
    asked = _past_apology(_past_preamble(_past_thanks(_past_courtesy(toks))))
    return _past_being_told(_past_not_knowing(asked))


# words that thank, opening courtesy said after a question with no mark between them
_THANKS = frozenset("thank thanks thx cheers appreciate appreciated".split())
# what a word of thanks may be the object of: "how do I *say* thank you in French"
_SAYING = frozenset("say says said saying write writes wrote writing send sending".split())


def _past_thanks(toks: list[_Tok]) -> list[_Tok]:
    """The tokens without thanks said after the question, no mark between: "how do i add
    a team member thank you", "WHAT IS THE CAPITAL OF CANADA thx", "is X deductible
    Thanks in advance!". The thanks run to the end, are courtesy and nothing else
    (:func:`_courteous`) and follow a content word that is no verb of saying ("how do I
    *say* thanks", "write a thank you" keep theirs); all of them when there are none.
    Courtesy of two words or more that opens with a capital after a word in lower case
    reads so too: "how do i install python Any help appreciated.", "... Please advise"."""
    for k in range(max(1, len(toks) - _COURTESY_WORDS), len(toks)):
        t, before = toks[k], toks[k - 1]
        if t.after_mark or t.after_stop:
            continue
        if t.low not in _THANKS:
            if _unmarked_sentence(toks, k) and before.content and _courteous(toks[k:]):
                kept = toks[:k]
                kept[0].cut = True
                return kept
            continue
        said = before.low in _SAYING or before.low in _COURTESY  # "greatly appreciated"
        if before.content and not said and _courteous(toks[k:]):
            kept = toks[:k]
            kept[0].cut = True
            return kept
        return toks
    return toks


def _unmarked_sentence(toks: list[_Tok], k: int) -> bool:
    """Whether a sentence of two words or more starts at ``k`` with no mark before it:
    a capital after a word in lower case ("... leftover turkey Any help appreciated")."""
    words = [t for t in toks[k:] if t.kind != "sym"]
    return len(words) >= 2 and toks[k].text[:1].isupper() and toks[k - 1].text[-1:].islower()


def _past_preamble(toks: list[_Tok]) -> list[_Tok]:
    """The tokens after a greeting or aside that says nothing (:func:`_preamble`: "ok so
    do I owe ...?", "Hey there! is it safe ...?"), renumbered; all of them when there is
    none or nothing would be left."""
    aside = _preamble(toks)
    rest = [t for t in toks if id(t) not in aside]
    if not aside or not any(t.content for t in rest):
        return toks
    return _renumbered(rest)


def _past_courtesy(toks: list[_Tok]) -> list[_Tok]:
    """The tokens without the phrases of courtesy before and after the question
    (:func:`_courteous`), renumbered; all of them when there are none or nothing else
    would be left. "Hello, I hope you're doing well. What GPA do I need ...?" reads
    "What GPA do I need ...?"; "I hope my package arrives before Friday. Where is my
    package?" is no courtesy (it says what the question is about)."""
    starts = [0] + [i for i, t in enumerate(toks) if i and (t.after_mark or t.after_stop)]
    bounds = list(zip(starts, [*starts[1:], len(toks)], strict=True))
    first, last = 0, len(bounds)
    while first < last and _courteous(toks[slice(*bounds[first])]):
        first += 1
    while last > first and _courteous(toks[slice(*bounds[last - 1])]):
        last -= 1
    if (first, last) == (0, len(bounds)) or first == last:
        return toks
    kept = toks[bounds[first][0] : bounds[last - 1][1]]
    if not any(t.content for t in kept):
        return toks
    return _renumbered(kept)


def _past_apology(toks: list[_Tok]) -> list[_Tok]:
    """The tokens after an apology for asking, renumbered; all of them when there is
    none. The apology opens the text (after function words: "I'm so sorry ...") and
    runs, in one phrase of at most :data:`_APOLOGY_WORDS` words with no number, time or
    name, no topic ("about X") and at most two content words, to a question that starts
    after a mark or a "but" / "so": "Sorry for the trouble, how do I ...?", "Sorry if
    this is a dumb question but can I ...?". What it says is about the asking, not the
    question ("trouble", "dumb" are no qualifiers of it)."""
    words = [i for i, t in enumerate(toks) if t.kind != "sym"]
    first = next((k for k, i in enumerate(words[:3]) if toks[i].low in _APOLOGY), None)
    if first is None or any(toks[i].content for i in words[:first]):
        return toks
    said = 0  # content words: "bother", "dumb", "obvious"; a topic says more
    for k in words[first + 1 : first + 1 + _APOLOGY_WORDS]:
        t = toks[k]
        said += t.content and t.low not in lx.FILLER
        if t.number is not None or t.temporal is not None or t.entity or said > 2:
            return toks
        if t.low in _TOPIC:  # "Sorry to ask again *about* the premium plan, but ..."
            return toks
        opened = t.after_mark or t.after_stop or toks[k - 1].low in ("but", "so")
        if t.low in _CLAUSE_START and opened:
            return _renumbered(toks[k:])
        if (t.after_mark or t.after_stop) and t.low not in ("but", "so"):
            return toks  # another phrase: "Sorry, I'm abroad - how do I ...?" says more
    return toks


def _preamble(toks: list[_Tok]) -> set[int]:
    """The ids of a greeting or aside before the question ("Hi! Quick question - can I
    ...", "Hey there, I'd like to ..."): a first phrase that says nothing (no content word
    beyond filler, no number, time, name or negation), or, unpunctuated, greetings
    before a question word or an auxiliary ("hey there quick question how do I")."""
    start = 0  # phrases that say nothing, one after another
    marks = [i for i, t in enumerate(toks) if i and (t.after_mark or t.after_stop)]
    for i in marks:
        if not _says_nothing(toks[start:i]):
            break
        start = i
    for i in range(start, len(toks)):  # then greetings, unpunctuated
        if toks[i].low not in _DISCOURSE:
            if i > start and toks[i].low in _CLAUSE_START:
                start = i
            break
    return {id(u) for u in toks[:start]}


_JOINERS = frozenset("and or also plus then".split())
# words that point back to what the question is about: a clause holding one elaborates it
# ("What is X, and how does *it* work?"), it does not ask about something new
_ANAPHORS = frozenset("it its they them their theirs this that these those he him his she".split())


# the asker as the doer of a clause: "if *I* damaged it"
_CLAUSE_ASKERS = frozenset("i we".split())
_GENERIC_ONES = frozenset("a an any one".split())
# what may stand between a clause's doer and its verb: "if I *have* damaged it"
_CLAUSE_GLUE = frozenset("have has had did do does was were am is are just accidentally".split())


def _clause_doer(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> list[Difference]:
    """The asker doing a clause's act on one side, someone named on the other: "Can I
    get a refund if *I* damaged it?" / "... if *the courier* damaged it?", "What happens
    if I cancel the order?" / "... if the seller cancels the order?". The same verb after
    the same "if" (when, after, ...), a doer that is not the asker: another question. A
    doer anyone may be ("if *a customer* cancels") is left to the rest of the analysis."""
    back = {j: i for i, j in pairs.items()}
    for one, other, index in ((q, c, pairs), (c, q, back)):
        for k in range(len(one) - 2):
            if one[k].low not in _SUBORDINATORS or one[k + 1].low not in _CLAUSE_ASKERS:
                continue
            v = k + 2
            while v < len(one) and one[v].low in _CLAUSE_GLUE:
                v += 1
            j = index.get(v) if v < len(one) and one[v].content else None
            if j is None:
                continue
            m = j - 1
            while m > 0 and other[m].low in _CLAUSE_GLUE:
                m -= 1
            start = m
            while start > 0 and other[start - 1].low not in _SUBORDINATORS:
                start -= 1
            if start == 0 or other[start - 1].low != one[k].low or start > m:
                continue
            doer = other[start : m + 1]
            if doer[0].low in _GENERIC_ONES:
                continue  # "if *a customer* cancels": anyone, the asker too
            named = [t for t in doer if t.content and t.pos not in index.values()]
            if named:
                asker, said = one[k + 1].text, " ".join(t.text for t in doer)
                shown = (asker, said) if one is q else (said, asker)
                return [Difference("audience", shown[0], shown[1], True)]
    return []


def _requests_added(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> list[Difference]:
    """A request one side adds: a clause asking about something new ("...? Also, how do
    I delete my account?", "cancel my plan *and get a refund*"), sharing no content word
    with the other side and not pointing back at its subject. The answer to the shorter
    text leaves it unanswered."""
    out = []
    for toks, aligned in ((q, set(pairs)), (c, set(pairs.values()))):
        added = [
            clause
            for clause in _clauses(toks)
            if _asks(clause)
            and not any(t.pos in aligned for t in clause if t.content)
            and not any(t.low in _ANAPHORS for t in clause)
        ]
        if added:
            words = [" ".join(t.text for t in clause) for clause in added]
            pair = (words, []) if toks is q else ([], words)
            out.append(_diff("request", *pair))
    return out


def _clauses(toks: list[_Tok]) -> list[list[_Tok]]:
    """The text cut into sentences, and before a joining word ("and", "or", "also") that
    opens a clause of its own ("and *how* do I", "and *get* a refund"; not "pros and
    cons"). A clause after a joining word is marked by that word, first."""
    out: list[list[_Tok]] = []
    for i, t in enumerate(toks):
        stop = t.after_stop and not (toks[i - 1].dotted or "." in toks[i - 1].text)  # "U.S."
        if not out or stop or (t.low in _JOINERS and _opens_clause(toks[i + 1 :], verb=True)):
            out.append([])
        out[-1].append(t)
    return out if len(out) > 1 else []


def _opens_clause(rest: list[_Tok], *, verb: bool) -> bool:
    """The words start a question: past joining and greeting words, a question word or an
    auxiliary; with ``verb``, a verb in its base form too ("and *get* a refund")."""
    head = next((t for t in rest if t.low not in _JOINERS and t.low not in _DISCOURSE), None)
    if head is None:
        return False
    if head.low in _CLAUSE_START:
        return True
    return verb and _base_verb(head.low) and head.low not in lx.FILLER


def _base_verb(word: str) -> bool:
    """A verb's base form ("get", "delete"; not "cons", "deleted", "getting")."""
    get_all, _ = _LemmaTables.get()
    if get_all is None or not word.isalpha():
        return False
    return word in get_all(word).get("VERB", ())


_SUBJECTS = frozenset("i you we they he she it u".split())


def _names_thing(clause: list[_Tok]) -> bool:
    """A content word that can name a thing, where a noun stands: not filler, and not
    right after a subject, an auxiliary or "to" (where the verb stands: "where do I
    *start*"): "and can I get a *refund*", "how do I delete my *account*"."""
    for i, t in enumerate(clause):
        if not t.content or t.low in lx.FILLER or t.low in _DETERMINERS:
            continue
        before = clause[i - 1].low if i else ""
        if before in _SUBJECTS or before in _AUXILIARIES or before == "to":
            continue
        if t.entity or "NOUN" in _readings(t.low) or not _readings(t.low):
            return True
    return False


# who a request for help is made to: "Can *anyone* advise?", "Could *you* assist?"
_ADDRESSEES = frozenset("you u anyone anybody someone somebody everyone y'all ya".split())


def _asks(clause: list[_Tok]) -> bool:
    """A clause that asks something: a question, or a verb after a joining word, holding a
    content word that is not filler. A request for help made to the reader ("Can anyone
    advise?", "Would appreciate any pointers.") asks nothing of its own."""
    if not _names_thing(clause):
        return False  # "What should I do?", "Where do I start?": nothing new to ask about
    if not _opens_clause(clause, verb=clause[0].low in _JOINERS):
        return False
    words = [t for t in clause if t.low not in _JOINERS and t.low not in _DISCOURSE]
    if len(words) > 1 and words[0].low in _AUXILIARIES:
        subject = words[1]
        if subject.low in _ADDRESSEES or subject.low == "be" or _base_verb(subject.low):
            return False  # "Could you ...", "Would appreciate ...", "Would be grateful"
    return True


def _says_nothing(head: list[_Tok]) -> bool:
    return not any(
        (u.content and u.low not in lx.FILLER)
        or u.number is not None
        or u.temporal is not None
        or u.entity
        or u.low in lx.NEGATIONS
        or u.low in _QUESTION_START  # "What is it, and how do I use it?": two questions
        for u in head
    )


def _function_words(left: list[_Tok]) -> Counter[str]:
    """The left-over function words, articles aside; numbers and times were compared by
    value ("a quarter cup" / "1/4 cup" say one number, "per yr" / "per year" one rate)."""
    return Counter(
        t.temporal or _agreed(t.low)
        for t in left
        if not t.content and t.low not in _ARTICLES and t.number is None
    )


def _direction_differences(
    q: list[_Tok], c: list[_Tok], left_q: list[_Tok], left_c: list[_Tok], pairs: dict[int, int]
) -> list[Difference]:
    """Opposed directions left over ("to" / "from"), swapped arguments, or one word
    headed by opposite directions."""
    out: list[Difference] = []
    dq, dc = (
        Counter(
            t.low
            for t in left
            if t.low in lx.DIRECTIONAL and t.low != "without" and not _infinitive(toks, t)
        )
        for toks, left in ((q, left_q), (c, left_c))
    )
    if any(
        (x, y) in lx.DIRECTION_OPPOSITES or (y, x) in lx.DIRECTION_OPPOSITES for x in dq for y in dc
    ):
        out.append(_diff("direction", sorted(dq), sorted(dc)))
    # near-identical pairs (at most one unaligned word): every crossing is judged; looser
    # rewordings only by the older swap rules (crossings there are mostly rephrasing)
    loose = sum(1 for t in left_q + left_c if t.content and t.low not in lx.FILLER) > 1
    swap = (None if loose else _crossed(q, c, pairs)) or _roles_swapped(q, c)
    if swap is None and loose:
        swap = _swapped(q, c, pairs)
    if swap is not None:
        out.append(swap)
    elif not out:
        out += _turned(q, c)
    return out


def _infinitive(toks: list[_Tok], t: _Tok) -> bool:
    """A "to" that marks a verb, not a direction: "the best way *to* remove a stain
    from carpet", "how *to* get ...", "to" before a word that reads only as a verb."""
    if t.low != "to":
        return False
    i = t.pos
    before = toks[i - 1].low if i else ""
    after = toks[i + 1].low if i + 1 < len(toks) else ""
    readings = _readings(after)
    return before in ("how", "way", "ways") or ("VERB" in readings and "NOUN" not in readings)


# The person a pronoun points at, whatever its case: "I" / "me" / "my" are one referent
_PERSON = {
    **dict.fromkeys(("i", "me", "my", "mine", "myself"), "1s"),
    **dict.fromkeys(("we", "us", "our", "ours", "ourselves"), "1p"),
    **dict.fromkeys(("you", "your", "yours", "yourself"), "2"),
    **dict.fromkeys(("he", "him", "his", "himself"), "3m"),
    **dict.fromkeys(("she", "her", "hers", "herself"), "3f"),
    **dict.fromkeys(("they", "them", "their", "theirs", "themselves"), "3p"),
    **dict.fromkeys(("someone", "somebody", "anyone", "anybody"), "some"),
}
_PHRASE_MARKS = frozenset(",.?!;:()")
_DASHES = frozenset("-–—")
#: Words that open a subordinate clause: a clause moves whole around them ("when I sell
#: at a loss, can I deduct it?" / "can I deduct it when I sell at a loss?").
_SUBORDINATORS = frozenset(
    "if when whenever while because since unless although though until once whether "
    "after before".split()
)


@functools.lru_cache(maxsize=65536)
def _readings(word: str) -> frozenset[str]:
    """The parts of speech a word can be (lemminflect's tables), e.g. {"ADJ", "NOUN"}."""
    get_all, _ = _LemmaTables.get()
    if get_all is None or not word.isalpha():
        return frozenset()
    return frozenset(get_all(word))


def _move_side(toks: list[_Tok], aligned: dict[int, str]) -> tuple[_moves.Side, list[_Tok]]:
    """One side for :mod:`agent_cache._moves`: aligned content words share a key (the
    query word's form), pronouns are keyed by person, articles and fillers left out."""
    keys: list[str] = []
    kept: list[_Tok] = []
    marks: list[bool] = []
    mark = True
    for t in toks:
        mark = mark or t.after_mark
        if t.kind == "sym":
            mark = mark or t.low in _PHRASE_MARKS
            continue
        if (t.used and t.temporal is None and t.number is None) or (
            t.low in _ARTICLES and not t.verb
        ):
            continue
        if t.low in lx.FILLER and t.pos not in aligned and not t.verb:
            continue
        if t.low in _PERSON:
            key = "@" + _PERSON[t.low]
        elif t.number is not None:
            key = f"#{t.number}{t.unit or ''}"
        elif t.pos in aligned:
            key = aligned[t.pos]
        else:
            key = t.temporal or (min(t.lemmas) if t.lemmas else t.low)
        keys.append(key)
        kept.append(t)
        marks.append(mark)
        mark = False
    labels, numbers = _moves.clauses(
        marks, [t.low if t.low in _SUBORDINATORS else None for t in kept]
    )
    side = _moves.Side(
        keys,
        marks,
        [_opens_phrase(t) for t in kept],
        [_modifier(t.low) for t in kept],
        labels,
        numbers,
        [t.low in _ADJUNCT_PREPOSITIONS for t in kept],
    )
    return side, kept


_ADJUNCT_PREPOSITIONS = frozenset("in on at for from to with by via into onto during".split())


def _modifier(word: str) -> bool:
    """A word that reads only as an adverb or adjective, an adverb among them
    ("quickest", "permanently"): it may move around the words it modifies."""
    readings = _readings(word)
    return "ADV" in readings and readings <= {"ADJ", "ADV"}


def _opens_phrase(t: _Tok) -> bool:
    return (
        (not t.content and t.low not in _PERSON)
        or t.temporal is not None
        or (t.low.endswith("ing") and "VERB" in _readings(t.low))
    )


def _meaningful(t: _Tok) -> bool:
    """A word whose place matters: a content word, a number, a time or a person; not a
    modal predicate, read by the frames wherever it stands ("the *due* date for my
    payment" / "When is my payment *due*?")."""
    if t.low in MODAL_PREDICATES:
        return False
    return t.content or t.number is not None or t.temporal is not None or t.low in _PERSON


_HAVE_VERBS = frozenset("have has offer offers provide provides".split())
_AT = frozenset("at in on inside".split())
_NOUN_PHRASE_OPENERS = _SUBJECT_DETERMINERS | frozenset("a an any some".split())
_PHRASE_ENDS = MODAL_PREDICATES | _HAVE_VERBS  # "parking *available* at", "hotel *offer*"


def _phrase_head(toks: Sequence[_Tok], i: int) -> int | None:
    """The last word of the run of content words from ``i`` on, determiners skipped:
    "a heated *pool*", "free *wifi*"; None when no content word starts there."""
    while i < len(toks) and toks[i].low in _NOUN_PHRASE_OPENERS:
        i += 1
    head = None
    while i < len(toks) and toks[i].content and toks[i].low not in _PHRASE_ENDS:
        head, i = i, i + 1
    return head


def _possession(toks: Sequence[_Tok]) -> tuple[str, int, int] | None:
    """(frame, owner, thing) for a question that asks whether a place has a thing:
    "Does *the hotel* have *parking*?" ("have"), "Is there *parking* at *the hotel*?",
    "Is *parking* available at *the hotel*?" ("at"); None for any other question."""
    aside = _preamble(list(toks))  # "Quick q - does the hotel have parking?"
    words = [t for t in toks if t.kind != "sym" and t.low not in lx.OPENERS and id(t) not in aside]
    low = [t.low for t in words]
    if low[:1] in (["does"], ["do"], ["did"]):
        h = next((k for k in range(2, len(low)) if low[k] in _HAVE_VERBS), None)
        owner = _phrase_head(words, 1)
        thing = _phrase_head(words, h + 1) if h is not None else None
        if owner is not None and thing is not None and owner + 1 == h:
            return "have", words[owner].pos, words[thing].pos
        return None
    if low[:1] not in (["is"], ["are"]):
        return None
    start = 2 if low[1:2] == ["there"] else 1
    thing = _phrase_head(words, start)
    if thing is None:
        return None
    k = thing + 1 + (low[thing + 1 : thing + 2] == ["available"])
    if k < len(low) and low[k] in _AT and (start == 2 or low[k - 1] == "available"):
        owner = _phrase_head(words, k + 1)
        if owner is not None:
            return "at", words[owner].pos, words[thing].pos
    return None


def _possession_turned(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> str:
    """ "Does the hotel have parking?" / "Is there parking at the hotel?": the owner and
    the thing trade places between the two frames, so their crossing says nothing
    (``"same"``); "Does the gym have a pool?" / "Is there a gym at the pool?" keeps the
    words in order but swaps their roles (``"swapped"``); ``""`` otherwise."""
    pq, pc = _possession(q), _possession(c)
    if pq is None or pc is None or pq[0] == pc[0]:
        return ""
    owner, thing = pairs.get(pq[1]), pairs.get(pq[2])
    if (owner, thing) == pc[1:]:
        return "same"
    if (thing, owner) == pc[1:]:
        return "swapped"
    return ""


def _crossed(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> Difference | None:
    """Words that crossed (:mod:`agent_cache._moves`): a refusal (``order``) unless a
    moved clause or phrase, a passive voice, a symmetric connector ("X or Y") or a
    place's thing asked in two frames explains it."""
    turned = _possession_turned(q, c, pairs)
    if turned == "swapped":
        return Difference("order", "… have …", "… at …", True)
    if turned == "same":
        return None
    form = _aligned_forms(q, pairs)
    sq, kq = _move_side(q, form)
    sc, kc = _move_side(c, {j: form[i] for i, j in pairs.items()})
    meaningful = {k for k, t in zip(sq.keys, kq, strict=True) if _meaningful(t)}
    meaningful |= {k for k, t in zip(sc.keys, kc, strict=True) if _meaningful(t)}
    derived = {form[i] for i, j in pairs.items() if _nominalized(q[i], c[j])}
    turned_doer = _doer_turned(((sq, kq), (sc, kc)), derived)
    if turned_doer is not None:
        return Difference("order", turned_doer[0], turned_doer[1], True)
    free = _moves.detached(sq, sc) | derived
    crossed = _moves.inversions(sq, sc, frozenset(meaningful), frozenset(free))
    doer = _doer_fronted(((sq, kq), (sc, kc)))
    if doer is not None:
        return Difference("order", doer[0], doer[1], True)
    voice = _voice((sq, kq, q), (sc, kc, c))
    if voice == "swapped":
        return Difference("order", "by … (passive)", "… (active)", True)
    if not crossed:
        return None
    crossed = [
        (a, b)
        for a, b in crossed
        if not (_symmetric_near(sq, kq, (a, b)) or _symmetric_near(sc, kc, (a, b)))
        and not _compound_rewritten(((sq, kq), (sc, kc)), (a, b), (q, c))
        and not (_named_back(sq, kq, (a, b)) or _named_back(sc, kc, (a, b)))
        and not _genitive_turned(((sq, kq), (sc, kc)), (a, b))
        and not _doer_after_noun(((sq, kq), (sc, kc)), (a, b), derived)
        and not _extraposed(((sq, kq), (sc, kc)), (a, b))
        and not _object_fronted(((sq, kq), (sc, kc)), (a, b))
    ]
    if not crossed or voice == "changed" or _possessive_explains(q, c):
        return None
    a, b = crossed[0]
    shown_q = " ".join(t.text for k, t in zip(sq.keys, kq, strict=True) if k in (a, b))
    shown_c = " ".join(t.text for k, t in zip(sc.keys, kc, strict=True) if k in (a, b))
    return Difference("order", shown_q, shown_c, True)


_NOMINAL = (
    "ing",
    "tion",
    "sion",
    "ment",
    "ance",
    "ence",
    "al",
    "ure",
    "age",
    "ity",
    "ness",
    "able",
    "ible",
)


def _nominalized(x: _Tok, y: _Tok) -> bool:
    """One word the noun of the other ("calculation" / "calculated", "meaning" /
    "mean"): a nominalization moves the verb's place in the sentence."""
    if x.low == y.low:
        return False
    if _action_noun(x, y):  # WordNet: "deliver" / "delivery", "complain" / "complaint"
        return True
    if not (x.low.endswith(_NOMINAL) or y.low.endswith(_NOMINAL)):
        return False
    return bool(x.lemmas & y.lemmas) or _derived(x.low, y.low)


_COMPOUND_PREPOSITIONS = frozenset("of for on in at from with".split())


def _compound_rewritten(
    sides: tuple[tuple[_moves.Side, list[_Tok]], tuple[_moves.Side, list[_Tok]]],
    pair: tuple[str, str],
    toks: tuple[list[_Tok], list[_Tok]],
) -> bool:
    """A noun compound on one side written with a preposition on the other: "my account
    password" / "the password for my account", "Windows Phone games" / "games for
    Windows Phone"; or, for a head that is also a verb, as the verb and its object
    (:func:`_split_as_object`). The two words stand in one run of content words ending
    in a noun (not a verb form: "my husband *listed*") on one side; on the other, the
    run's head part comes first, then a preposition (and a possessive), then its
    modifier part. A run that a noun left out of it follows ("the password *reset*
    process", the way noun said nothing) ends in a noun whatever its last word is."""
    for k, ((one, kept), (other, _)) in enumerate((sides, sides[::-1])):
        i, j = sorted((one.keys.index(pair[0]), one.keys.index(pair[1])))
        inside = _compound_words(one, kept, other)
        lo, hi = i, j
        while lo > 0 and inside[lo - 1]:
            lo -= 1
        while hi + 1 < len(kept) and inside[hi + 1]:
            hi += 1
        if not all(inside[i : j + 1]):
            continue
        while hi > j and _past_form(kept[hi].low):
            hi -= 1  # "Is the Monday meeting *cancelled*?": the participle is no part of it
        last = kept[hi]
        nominal = "NOUN" in _readings(last.low) and not _past_form(last.low)
        if not (nominal or _modifies_noun(last, toks[k])):
            continue
        for cut in range(i + 1, j + 1):  # modifier part [m, cut), head part [cut, h]
            for m in range(lo, i + 1):
                for h in range(j, hi + 1):
                    head, modifier = one.keys[cut : h + 1], one.keys[m:cut]
                    if _split_by_preposition(other.keys, head, modifier):
                        return True
                    if (
                        len(head) == 1
                        and _ends_noun_phrase(kept, h)
                        and _split_as_object(sides[1 - k], head[0], modifier)
                    ):
                        return True
    return False


def _doer_after_noun(
    sides: tuple[tuple[_moves.Side, list[_Tok]], tuple[_moves.Side, list[_Tok]]],
    pair: tuple[str, str],
    derived: set[str],
) -> bool:
    """A verb's doer and object on one side ("How do *employees* submit *expenses*?",
    "How can a *student* appeal a *grade*?"), on the other the object before the verb's
    noun (or the verb read as a noun) and the doer after it, behind "for" or "by" ("the
    *expense* submission process *for employees*", "the *grade* appeal process *for
    students*")."""
    for (one, kept), (other, theirs) in (sides, sides[::-1]):
        for doer, obj in (pair, pair[::-1]):
            ka, ko = one.keys, other.keys
            i, k = ka.index(doer), ka.index(obj)
            if k < i + 2 or not _in_one_phrase(kept[i + 2 : k]):
                continue  # doer, verb, object, with at most a possessive between
            verb = ka[i + 1]
            if verb not in ko or not (verb in derived or "VERB" in _readings(kept[i + 1].low)):
                continue
            j, v, m = ko.index(obj), ko.index(verb), ko.index(doer)
            # the object and the act's noun in one compound ("maintenance issue
            # reporting"), the doer behind "for" / "by"
            compound = j < v and all(t.content for t in theirs[j:v])
            if compound and v < m and ko[m - 1] in ("for", "by"):
                return True
    return False


def _extraposed(
    sides: tuple[tuple[_moves.Side, list[_Tok]], tuple[_moves.Side, list[_Tok]]],
    pair: tuple[str, str],
) -> bool:
    """The subject said after "it" as a "to" clause on one side, first as a gerund on the
    other, and the two crossed words one in the predicate, one in that clause: "Is *it
    safe to take* ibuprofen with coffee?" / "Is *taking* ibuprofen with coffee *safe*?",
    "How long does *it take to ship* to Canada?" / "... does *shipping* to Canada
    *take*?"."""
    for (one, _), (other, theirs) in (sides, sides[::-1]):
        ka, ko = one.keys, other.keys
        if "it" not in ka:
            continue
        i = ka.index("it")
        to = next((x for x in range(i + 1, min(i + 5, len(ka) - 1)) if ka[x] == "to"), None)
        if to is None or ka[to + 1] not in ko:
            continue
        said, clause = set(ka[i + 1 : to]), set(ka[to + 1 :])
        a, b = pair
        predicate = a if a in said and b in clause else b if b in said and a in clause else None
        v = ko.index(ka[to + 1])
        if predicate is not None and theirs[v].low.endswith("ing") and v < ko.index(predicate):
            return True
    return False


# the most words between a fronted object and its "to" ("Is ibuprofen *ok* to take",
# "Is Python *really hard* to learn")
_FRONTED_GAP = 3


def _object_fronted(
    sides: tuple[tuple[_moves.Side, list[_Tok]], tuple[_moves.Side, list[_Tok]]],
    pair: tuple[str, str],
) -> bool:
    """The object of a "to" clause (or a gerund) said first, as the subject, on one
    side, after "it" and the verb on the other, the two crossed words one of that object
    and one of the predicate or the verb: "Is *ibuprofen* ok *to take* with coffee?" /
    "Is it safe *to take ibuprofen* with coffee?", "Is tap water safe to drink?" / "Is
    it safe to drink tap water?", "Is a used car worth buying?" / "Is it worth buying a
    used car?". The object is the run of content words right after the verb on the
    "it" side, all of it before the verb on the other: "Is the dog safe to leave with
    the cat?" / "Is it safe to leave the cat with the dog?" and "Is the meat safe to eat
    raw?" / "Is it safe to eat raw meat?" stay crossed."""
    for (one, kept), (other, theirs) in (sides, sides[::-1]):
        ka, ko = one.keys, other.keys
        if "it" not in ka or "it" in ko:
            continue
        i = ka.index("it")
        v = next(
            (
                x + (ka[x] == "to")
                for x in range(i + 2, min(i + 6, len(ka) - 1))
                if ka[x] == "to" or kept[x].low.endswith("ing")
            ),
            None,
        )
        if v is None:
            continue
        y = v + 1
        while y < len(ka) and kept[y].low in _NOUN_PARTICLES:  # "pick *up* Spanish"
            y += 1
        if y < len(ka) and kept[y].low in _SUBJECT_DETERMINERS:  # "eat *this* mushroom"
            y += 1
        obj = []
        while y < len(ka) and kept[y].content:
            obj.append(ka[y])
            y += 1
        moved = set(ka[i + 1 : v]) | {ka[v]}  # the predicate and the verb
        a, b = pair
        if not obj or not ((a in obj and b in moved) or (b in obj and a in moved)):
            continue
        if ka[v] not in ko or any(w not in ko for w in obj):
            continue
        last, w = max(ko.index(o) for o in obj), ko.index(ka[v])
        gerund = theirs[w].low.endswith("ing")
        if not (last < w <= last + _FRONTED_GAP + 2 and (ko[w - 1] == "to" or gerund)):
            continue
        if all(t.low not in lx.NEGATIONS for t in theirs[last + 1 : w]):
            return True
    return False


def _doer_fronted(
    sides: tuple[tuple[_moves.Side, list[_Tok]], tuple[_moves.Side, list[_Tok]]],
) -> tuple[str, str] | None:
    """A doer after "for" in a "to" clause with no object ("Is it hard *for the teacher*
    to please?": the teacher pleases) said first on the other side, where it is the
    one the act is done to ("Is *the teacher* hard to please?": the teacher is
    pleased). The two shown, as each side has them; None when the roles hold."""
    for (one, kept), (other, _) in (sides, sides[::-1]):
        ka, ko = one.keys, other.keys
        if "it" not in ka or "for" not in ka or "it" in ko:
            continue
        f = ka.index("for")
        to = next((x for x in range(f + 2, min(f + 6, len(ka) - 1)) if ka[x] == "to"), None)
        if to is None or ka.index("it") > f:
            continue
        doer = [ka[y] for y in range(f + 1, to) if kept[y].content]
        verb = ka[to + 1]
        if not doer or any(kept[y].content for y in range(to + 2, len(ka))):
            continue  # the act's object is said: "for beginners to learn Rust"
        if verb not in ko or any(d not in ko for d in doer):
            continue
        w, first = ko.index(verb), min(ko.index(d) for d in doer)
        if first < w and ko[w - 1] == "to" and "for" not in ko[first - 1 : first]:
            shown = (f"for {' '.join(doer)} to {verb}", f"{' '.join(doer)} … to {verb}")
            return shown if one is sides[0][0] else (shown[1], shown[0])
    return None


def _in_one_phrase(between: list[_Tok]) -> bool:
    """Nothing but possessives ("their") and content words between a verb and its object."""
    return all(t.content or t.low in _POSSESSIVES for t in between)


def _doer_turned(
    sides: tuple[tuple[_moves.Side, list[_Tok]], tuple[_moves.Side, list[_Tok]]],
    derived: set[str],
) -> tuple[str, str] | None:
    """A verb's doer on one side ("How do *teachers* pay *parents*?") named on the other
    right before the verb's noun, where a noun says whom the act is done to ("the
    *teacher payment* process *for parents*": teachers are paid), and the object after
    "for" or "by": the roles are swapped. The two shown, as each side has them."""
    for (one, kept), (other, _) in (sides, sides[::-1]):
        ka, ko = one.keys, other.keys
        for x, verb in enumerate(ka):
            if not x or verb not in derived or verb not in ko or not kept[x - 1].content:
                continue
            if "VERB" not in _readings(kept[x].low):
                continue
            objects = [ka[y] for y in range(x + 1, len(ka)) if kept[y].content]
            doer, obj = ka[x - 1], objects[0] if objects else None
            if obj is None or doer not in ko or obj not in ko:
                continue
            j, m, n = ko.index(doer), ko.index(verb), ko.index(obj)
            if j + 1 == m < n and ko[n - 1] in ("for", "by"):
                shown = (f"{doer} {verb} {obj}", f"{doer} {verb} … for {obj}")
                return shown if one is sides[0][0] else (shown[1], shown[0])
    return None


# particles of a phrasal noun ("time off", "follow up", "check out")
_NOUN_PARTICLES = frozenset("off up out down back over".split())


def _compound_words(one: _moves.Side, kept: list[_Tok], other: _moves.Side) -> list[bool]:
    """Per kept word of ``one``, whether it may stand in a noun compound: a content word
    or a time ("the *Saturday hours*" / "the hours on Saturday"), or the particle of a
    phrasal noun between two content words when the other side has the same word and
    particle ("*time off* requests" / "request *time off*")."""
    pairs = set(zip(other.keys, other.keys[1:], strict=False))
    # "Saturday hours"; not a preposition ("the photo upload *through* Google Drive")
    out = [(t.content or t.temporal is not None) and t.low not in _PREPOSITIONS for t in kept]
    for x in range(1, len(kept) - 1):
        t = kept[x]
        if t.low in _NOUN_PARTICLES and out[x - 1] and kept[x + 1].content:
            out[x] = (one.keys[x - 1], one.keys[x]) in pairs
    return out


def _ends_noun_phrase(kept: list[_Tok], h: int) -> bool:
    """Whether the word at ``h`` ends its noun phrase: no object follows it ("a *password
    reset*?", "the *prescription transfer* to ..."; "does a girl *finger herself*", "a
    dog *bite* the man" read it as a verb)."""
    if h + 1 >= len(kept):
        return True
    nxt = kept[h + 1]
    opens_object = nxt.content and nxt.low not in _PREPOSITIONS  # "... upload *through* X"
    return nxt.low not in _PERSON and not (opens_object and nxt.pos > kept[h].pos + 1)


# a closed class: a word of it opens a phrase of its own, never a verb's object
_PREPOSITIONS = frozenset(
    """about above across after against along amid among around at before behind below
    beneath beside besides between beyond by despite during except for from in inside
    into like near of off on onto outside over past per since through throughout till to
    toward towards under underneath until upon via with within without""".split()
)


def _split_as_object(side: tuple[_moves.Side, list[_Tok]], verb: str, obj: list[str]) -> bool:
    """The compound's head as a verb with its modifier as the object: "a *password
    reset*" / "*reset* my *password*", "a *plan upgrade*" / "*upgrade* the *plan*". The
    verb stands where a verb does (first, or after a function word: "how do I *reset*",
    "to *reset*"; "report a *bite* dog" is a noun), possessives between."""
    keys, kept = side[0].keys, side[1]
    for x, key in enumerate(keys):
        if key != verb or "VERB" not in _readings(kept[x].low):
            continue
        if x and kept[x - 1].content:
            continue
        k = x + 1
        while k < len(keys) and keys[k].startswith("@"):
            k += 1
        if keys[k : k + len(obj)] == obj:
            return True
    return False


def _split_by_preposition(keys: list[str], head: list[str], modifier: list[str]) -> bool:
    """``head``, then a preposition (possessives between), then ``modifier``, in ``keys``."""
    n = len(head)
    for x in range(len(keys) - n + 1):
        if keys[x : x + n] != head:
            continue
        k = x + n
        if k >= len(keys) or keys[k] not in _COMPOUND_PREPOSITIONS:
            continue
        while k < len(keys) and (keys[k] in _COMPOUND_PREPOSITIONS or keys[k].startswith("@")):
            k += 1
        if keys[k : k + len(modifier)] == modifier:
            return True
    return False


def _nominalization_frame(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> bool:
    """One side asks how to do something, the other asks about its noun: "How do I
    renew my lease?" / "What's the lease renewal process?", "How is tax calculated?" /
    "What is the calculation of tax?". A verb on the "how" side matched to its noun
    (-tion, -ment, -al, ...) on a side that opens with "what"/"which" or with no
    question word ("email validation in JavaScript")."""
    if _opener(q) == _opener(c) == "polar":
        return _polar_nominalized(q, c, pairs)
    for one, other, flip in ((q, c, False), (c, q, True)):
        if _opener(one) != "how" or _opener(other) in ("how", "polar", *lx.QUESTION_WORDS):
            continue
        for i, j in pairs.items():
            verb, noun = (c[j], q[i]) if flip else (q[i], c[j])
            if (
                verb.low != noun.low
                and (noun.low.endswith(_NOMINAL) or _action_noun(verb, noun))
                and "VERB" in _readings(verb.low)
                and "NOUN" in _readings(noun.low)
                and _nominalized(verb, noun)
            ):
                return True
    return False


_NOUN_ENDINGS = tuple(e for e in _NOMINAL if e not in ("able", "ible", "al"))
_POTENTIAL = frozenset("can could may possible able available".split())


def _potential(toks: list[_Tok]) -> bool:
    """The question asks whether a thing can be done: a modal of ability, "possible",
    or a word in -able / -ible ("transferable", "refundable")."""
    return any(t.low in _POTENTIAL or t.low.endswith(("able", "ible")) for t in toks)


def _polar_nominalized(q: list[_Tok], c: list[_Tok], pairs: dict[int, int]) -> bool:
    """Two yes/no questions, one with a verb, the other with its noun or its -able word,
    both asking whether it can be done or neither: "Can my visa be extended?" / "Is a
    visa extension possible?", "Is my ticket transferable?" / "Can I transfer my
    ticket?"; or one asks whether it can be done and the other names the act as a noun
    ("Can I cancel for free?" / "Is cancellation free?"). "Is the deposit refundable?" /
    "Was the deposit refunded?" is no frame: one asks whether it can be, the other
    whether it was."""
    pq, pc = _potential(q), _potential(c)
    for i, j in pairs.items():
        x, y = q[i], c[j]
        if not _nominalized(x, y):
            continue
        plain = x if pc and not pq else y if pq and not pc else None
        if plain is None or (plain.low.endswith(_NOUN_ENDINGS) and "NOUN" in _readings(plain.low)):
            return True
    return False


def _asked_frame(
    q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok], pairs: dict[int, int]
) -> Difference | None:
    """The one question asked in two frames, when the words left over are only the
    frames': a duration ("How long does it take to ..." / "What's the ... time") or an
    attribute ("How tall is ..." / "What is the height of ..."), whether a thing is to be
    had ("Do you offer X?" / "Is there X?"), a comparison ("X vs Y" / "the difference
    between X and Y"), the way of an act ("How do I reset X?" / "How does an X reset
    work?")."""
    if _duration_frame(q, c, uq, uc):
        return Difference("frame", "how long … take", "… time", False)
    return (
        _way_frame(q, c, uq, uc, pairs)
        or _attribute_frame(q, c, uq, uc)
        or _offered_frame(q, c, uq, uc)
        or _compared_frame(q, c, uq, uc)
        or _modal_frame(q, c, uq, uc)
    )


def _modal_frame(q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok]) -> Difference | None:
    """The words left over are only modal predicates ("allowed", "possible", "required")
    and the two questions ask in one modality: "Is smoking allowed on the balcony?" /
    "Can I smoke on the balcony?", "What documents are required for ...?" / "What
    documents do I need ...?". "Is a refund possible?" / "Is a refund required?" differ
    in their modality, refused by the frames before this is asked."""
    left = uq + uc
    if not left or any(t.low not in MODAL_PREDICATES for t in left):
        return None
    words = ([t.low for t in side if not t.used] for side in (q, c))
    if any(kind == "modality" for kind, _, _ in frame_differences(*words)):
        return None
    shown = " ".join(t.text for t in left)
    return Difference("frame", shown, "(modality)", False)


# "Do you *offer* X?": a verb that asks whether a thing is to be had from the one asked
_OFFER_VERBS = frozenset("have offer provide carry sell".split())
_OFFERED_BY = frozenset({"you", "u", "y'all"})


def _offer_words(toks: Sequence[_Tok]) -> tuple[str, list[_Tok]] | None:
    """How a question asks whether a thing is to be had, and the frame's content words;
    None when it does not ask that: "Is there X?" / "Are there any X (available)?",
    "Do you have / offer / provide X?" (the verb), "Is X available?"."""
    words = _asked(toks)
    lows = [t.low for t in words]
    available = [words[-1]] if lows[-1:] == ["available"] else []
    if lows[:2] in (["is", "there"], ["are", "there"]):
        return "there", available
    if len(lows) >= 3 and lows[0] in ("do", "does") and lows[1] in _OFFERED_BY:
        verb = words[2]
        if verb.lemmas & _OFFER_VERBS or verb.low in _OFFER_VERBS:
            return f"do {verb.low}", [verb] if verb.content else []
    if lows[:1] in (["is"], ["are"]) and available:
        return "available", available
    return None


def _offered_frame(
    q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok]
) -> Difference | None:
    """Both sides ask whether one thing is to be had, in two frames, and the words left
    over are only the frames': "Do you offer student discounts?" / "Is there a student
    discount?", "Is a free trial available?" / "Do you have a free trial?"."""
    fq, fc = _offer_words(q), _offer_words(c)
    if fq is None or fc is None or fq[0] == fc[0]:
        return None
    if {id(t) for t in uq} != {id(t) for t in fq[1]} or {id(t) for t in uc} != {
        id(t) for t in fc[1]
    }:
        return None  # another word differs: judged as it is
    return Difference("frame", fq[0], fc[0], False)


_VERSUS = frozenset({"vs", "versus"})
# what "X vs Y" asks, said in words: how the two differ or compare (not which is better)
_COMPARED = frozenset("difference differences differ compare comparison".split())


def _compared_frame(
    q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok]
) -> Difference | None:
    """One side sets two things against each other with "vs" / "versus", the other asks
    how they differ or compare, and nothing else is left over: "Roth IRA vs traditional
    IRA" / "What's the difference between a Roth IRA and a traditional IRA?"."""
    for one, other, mine, theirs in ((q, c, uq, uc), (c, q, uc, uq)):
        if mine or not theirs or not any(t.low in _VERSUS for t in one):
            continue
        if any(t.low in _VERSUS for t in other):
            continue
        if all((t.lemmas | {t.low}) & _COMPARED for t in theirs):
            shown = " ".join(t.text for t in theirs)
            return Difference(
                "frame", "vs" if one is q else shown, shown if one is q else "vs", False
            )
    return None


_RECOMMENDED = frozenset("recommended suggested advised advisable ideal optimal".split())


def _attribute_frame(
    q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok]
) -> Difference | None:
    """One side asks "how W", the other, opening with "what" or "which", for the
    attribute W measures (WordNet's attribute links, ``data/wordnet_attributes.txt.gz``):
    *tall* / *height*, *old* / *age*, *often* / *frequency*, *far* / *distance*. Nothing
    else may be left over on either side, but for the word that names a "should" ("How
    often *should* I ...?" / "the *recommended* frequency")."""
    table = _attributes()
    for one, other, mine, theirs in ((q, c, uq, uc), (c, q, uc, uq)):
        if any(t.low in ("should", "ought") for t in one):  # "the recommended frequency"
            theirs = [t for t in theirs if t.low not in _RECOMMENDED]
        if len(mine) != 1 or len(theirs) != 1 or _opener(other) not in ("what", "which"):
            continue
        w, n = mine[0], theirs[0]
        word = w.low[4:] if w.low.startswith("how ") else w.low
        if word == w.low and (w.pos == 0 or one[w.pos - 1].low != "how"):
            continue
        if (n.lemmas | {n.low}) & table.get(word, frozenset()):
            return Difference("frame", f"how {word}", n.text, False)
    return None


_DURATION = frozenset({"time", "duration"})


def _duration_frame(q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok]) -> bool:
    """One side asks how long something takes, the other for its time: "How long does
    it take to approve a loan?" / "What's the approval time for a loan?". Left over are
    "how long" and "take" on one side, only "time" (or "duration") on the other, which
    opens with "what" ("What time ...?" asks the clock, not a duration)."""
    for one, other, mine, theirs in ((q, c, uq, uc), (c, q, uc, uq)):
        words = _asked(one)
        if not words or words[0].low != "how long" or _opener(other) != "what":
            continue
        if not theirs or any(t.low not in _DURATION for t in theirs):
            continue
        if any(t.pos > 0 and other[t.pos - 1].low in ("what", "which") for t in theirs):
            continue  # "What time does it ship?" asks the clock
        if all(t is words[0] or "take" in t.lemmas for t in mine):
            return True
    return False


# nouns that name the way to do something: "What's the process for ..." asks "how"
_PROCESS = frozenset("process processes procedure procedures steps".split())


def _process_frame(q: list[_Tok], c: list[_Tok], left_q: list[_Tok], left_c: list[_Tok]) -> bool:
    """One side asks the way to do something ("How do I request time off?"), the other
    its process ("What's the process for requesting time off?", "What are the steps to
    reset my router?": a left-over process noun on a side that opens with "what" or
    "which") or whether there is a way (:func:`_asks_for_a_way`), against a "how do I"
    question; or the steps to a goal against whether there is a way to it."""
    for one, other, left in ((q, c, left_c), (c, q, left_q)):
        if not (_opener(one) == "how" and _asks_manner(one)):
            continue
        if _opener(other) in ("what", "which") and any(t.low in _PROCESS for t in left):
            return True
        if _asks_for_a_way(other) or _asks_what_to_do(other):
            return True
    # "What do I need to do to ...?" / "Is there a way to ...?": no "how", one way
    return any(_asks_what_to_do(one) and _asks_for_a_way(other) for one, other in ((q, c), (c, q)))


# nouns that name the way in a question with no "how" or "what" of its own: "Router
# reset instructions?", "Can you explain the visa application process?"
_WAY_NOUNS = _PROCESS | frozenset("instructions instruction guide tutorial walkthrough".split())
# ... and after "what" ("What's the protocol for reporting a data breach?"), with the
# words that say it is the usual one ("the *recommended* approach to ...")
_WAY_WORDS = frozenset(
    """approach protocol workflow guidelines mechanism technique method methods practice
    practices""".split()
)
_WAY_AFTER_WHAT = _WAY_NOUNS | _WAY_WORDS
_WAY_MANNER = frozenset("recommended standard usual typical official correct right proper".split())


def _way_asked(toks: list[_Tok]) -> tuple[str, list[_Tok]] | None:
    """How a question asks the way of an act other than "How do I ...?" / "What's the
    process for ...?", and the words of that frame: "How does X work?" / "X: how does it
    work?" (``work``), "What does X involve?" / "What's involved in X?" (``involve``), a
    way noun in a question that opens with neither "how" nor "what" ("Router reset
    instructions?", "Can you explain the X process?"), "Walk me through X"."""
    words = _asked(toks)
    lows = [t.low for t in words]
    for k in range(len(lows) - 3):
        if lows[k] != "how" or lows[k + 1] not in ("does", "do") or lows[k + 2] in _ASKERS:
            continue
        work = [t for t in words[k + 3 :] if t.low == "work"]
        if len(work) == 1:
            return "how … work", work
    if lows[:1] == ["what"]:
        involve = [t for t in words[1:] if "involve" in t.lemmas or t.low == "involved"]
        if len(involve) == 1:
            return "what … involve", involve
        way = [t for t in words[1:5] if t.low in _WAY_AFTER_WHAT]
        if not way:
            return None
        return "what … process", [*way, *(t for t in words[1:5] if t.low in _WAY_MANNER)]
    if lows[:1] == ["how"] or not lows:
        return None
    walk = [t for t in words if t.low == "walk"]
    if walk and any(
        lows[i : i + 2] in (["me", "through"], ["us", "through"]) for i in range(len(lows))
    ):
        return "walk me through", [t for t in words if t.low in ("walk", "through")]
    way = [t for t in words if t.low in _WAY_NOUNS]
    return ("the process", way) if way else None


def _act_named(one: list[_Tok], other: list[_Tok], pairs: dict[int, int], flip: bool) -> bool:
    """The verb that "How do I V ...?" asks the way of (``one``) is matched to the act on
    the ``other`` side, as its noun or as the same word read as a noun: "*reset* my
    router" / "a router *reset*", "*register*" / "*registration*"; not "How do I *get*
    a VPN?" / "How does a VPN work?" (no act named) nor "*print*" / "*printer*"."""
    words = _asked(one)
    verb = words[3] if len(words) > 3 else None
    if verb is None or not verb.content or "VERB" not in _readings(verb.low):
        return False
    links = {j: i for i, j in pairs.items()} if flip else pairs
    mate = links.get(verb.pos)
    if mate is None:
        return False
    noun = other[mate]  # in the subject of "work" or before a way noun: read as a noun
    return noun.low == verb.low or bool(noun.lemmas & verb.lemmas) or _nominalized(verb, noun)


def _way_frame(
    q: list[_Tok], c: list[_Tok], uq: list[_Tok], uc: list[_Tok], pairs: dict[int, int]
) -> Difference | None:
    """Both sides ask the way of one act, in two frames, and the words left over are only
    the frames' (:func:`_way_asked`): "How do I reset my router?" / "How does a router
    reset work?", "What does passport renewal involve?", "Router reset instructions?".
    Against "How do I V ...?", V must be the act the other side names."""
    wq, wc = _way_asked(q), _way_asked(c)
    if wq is None and wc is None:
        return None
    if (wq is None and not _asks_manner(q)) or (wc is None and not _asks_manner(c)):
        return None
    if wq is not None and wc is not None and wq[0] == wc[0]:
        return None
    for mine, frame in ((uq, wq), (uc, wc)):
        allowed = {id(t) for t in frame[1]} if frame is not None else set()
        if any(id(t) not in allowed for t in mine):
            return None  # another word differs: judged as it is
    for one, other, flip, frame in ((q, c, False, wq), (c, q, True, wc)):
        if frame is None and _opener(one) == "how" and not _act_named(one, other, pairs, flip):
            return None
    shown = (wq[0] if wq else "how …", wc[0] if wc else "how …")
    return Difference("frame", shown[0], shown[1], False)


def _asks_what_to_do(toks: list[_Tok]) -> bool:
    """ "What do I need to do to renew my passport?", "What should I do to get a
    refund?": the steps to a goal, asked as "How do I ...?" is ("what" the object of a
    "do" that a "to" and the goal follow)."""
    words = [t.low for t in _asked(toks)]
    if words[:1] != ["what"]:
        return False
    if any(words[k : k + 2] == ["do", "to"] for k in range(2, min(len(words) - 2, 7))):
        return True
    return bool(_steps_taken(toks))


def _steps_taken(toks: list[_Tok]) -> set[int]:
    """The ids of the frame's words in "What *steps* should I *take* to ...?", "What
    *action* do I need to *take* to ...?", "What *steps* do I *follow* to ...?" (the
    steps to a goal, asked as "How do I ...?" is); empty for any other question."""
    words = _asked(toks)
    low = [t.low for t in words]
    if len(low) < 2 or low[0] != "what" or low[1] not in STEP_NOUNS:
        return set()
    for k in range(3, min(len(low) - 2, 8)):
        if low[k] in ("take", "follow") and low[k + 1] == "to":
            return {id(words[1]), id(words[k])}
    return set()


def _asks_for_a_way(toks: list[_Tok]) -> bool:
    """ "Is there a way to ...?", "Is there any way to ...?": a polar question whose
    answer is the way, asked as "How do I ...?" is. Not "Is it possible to ...?", which
    may ask whether a thing can happen at all ("... to get pregnant on my period")."""
    words = [t.low for t in _asked(toks)]
    if words[:2] != ["is", "there"]:
        return False
    rest = words[3:] if words[2:3] in (["a"], ["any"]) else words[2:]
    return rest[:1] in (["way"], ["ways"]) and rest[1:2] == ["to"]


def _genitive_turned(
    sides: tuple[tuple[_moves.Side, list[_Tok]], ...], pair: tuple[str, str]
) -> bool:
    """ "the *cost of shipping*" / "*shipping* to Canada *cost*", "the *price of* gas" /
    "*gas prices*", "the *cost to* deliver a *package*" / "the *package* delivery *cost*":
    on one side a word and, after an "of" (for, from, a "to" before a verb), the other;
    on the other side the other first."""
    for (side, kept), (other, _) in (sides, sides[::-1]):
        at = {k: i for i, k in enumerate(side.keys) if k in pair}
        there = {k: i for i, k in enumerate(other.keys) if k in pair}
        if len(at) != 2 or len(there) != 2:
            continue
        head = min(at, key=at.__getitem__)
        i, j = at[head], max(at.values())
        within = 2 <= j - i <= 5 and not any(side.marks[i + 1 : j + 1])  # one phrase
        of_like = kept[i + 1].low in _OF_LIKE or (
            kept[i + 1].low == "to" and _readings(kept[i + 2].low) == frozenset({"VERB"})
        )
        if within and of_like and there[head] > min(there.values()):
            return True
    return False


_BACK = frozenset({"it", "them"})


def _named_back(side: _moves.Side, kept: list[_Tok], pair: tuple[str, str]) -> bool:
    """One of the crossed words named first and the other a verb whose object is a
    pronoun after it, in a later phrase: "my printer won't connect, how do I *fix it*?"
    asks "How do I fix my printer ...?" (the object stands where the pronoun does)."""
    at = {k: i for i, k in enumerate(side.keys) if k in pair}
    if len(at) != 2:
        return False
    first, verb = sorted(at.values())
    return (
        verb + 1 < len(kept)
        and kept[verb + 1].low in _BACK
        # a new phrase between the two: a mark, or a question opening unpunctuated
        and (
            any(side.marks[first + 1 : verb + 1])
            or any(t.low in _QUESTION_START for t in kept[first + 1 : verb])
        )
    )


def _symmetric_near(side: _moves.Side, kept: list[_Tok], pair: tuple[str, str]) -> bool:
    """A symmetric connector between the two crossed words, or beside one of them
    ("London and Paris", "the difference between X and Y")."""
    at = [i for i, k in enumerate(side.keys) if k in pair]
    lo, hi = max(0, min(at) - 2), max(at) + 2
    return any(t.low in lx.SYMMETRIC and t.low != "," for t in kept[lo:hi])


_BE = frozenset("is are was were be been being am get gets got".split())


def _passive(
    side: _moves.Side, kept: list[_Tok], toks: list[_Tok]
) -> tuple[int, str | None] | None:
    """The participle of a passive voice ("can the order *be shipped*") as (its index,
    the key after "by" or None), or None. Not a participle that a noun follows in the
    sentence (``toks``): "What is the password *reset* process ...?" names a process."""
    for i, t in enumerate(kept[:-1]):
        if t.low not in _BE:
            continue
        for j in range(i + 1, min(i + 9, len(kept))):
            u = kept[j]
            if side.marks[j] or u.low in _BE:
                break
            if _past_form(u.low) and not _modifies_noun(u, toks):
                return j, _agent(side, kept, j)
    return None


def _modifies_noun(t: _Tok, toks: list[_Tok]) -> bool:
    """Whether the word right after ``t`` in its sentence is a noun that ``t`` modifies
    ("the password *reset process*"), not a time or a name ("delivered *yesterday*")."""
    nxt = toks[t.pos + 1] if t.pos + 1 < len(toks) else None
    return (
        nxt is not None
        and nxt.content
        and not nxt.entity
        and not nxt.after_mark
        and "NOUN" in _readings(nxt.low)
    )


@functools.lru_cache(maxsize=16384)
def _past_form(word: str) -> bool:
    """A verb's past form ("covered", "paid", "taken"): a verb reading whose lemma is
    another word, not an -ing or -s form."""
    get_all, _ = _LemmaTables.get()
    if get_all is None or not word.isalpha() or word.endswith(("ing", "s")):
        return False
    return any(lemma != word for lemma in get_all(word).get("VERB", ()))


_POSSESSIVES = frozenset("my your his her its our their".split())


# prepositions left at a question's end, their object the question word ("Who was the
# letter sent *to*?")
_STRANDED = frozenset("to for from with on about at into onto".split())


def _agent(side: _moves.Side, kept: list[_Tok], verb: int) -> str | None:
    """The key of the agent after "by" in a passive ("sued by my *employer*"); "who" for
    the doer asked ("*By whom* was it approved?", "*Who* was it issued *by*?"); "who?"
    and the preposition for a question word that a preposition left at the end takes
    ("*Who* was the letter sent *to*?": no doer asked); else None."""
    asked = any(t.low == "who" for t in kept[:verb]) or any(
        kept[k].low == "by" and kept[k + 1].low == "whom" for k in range(verb - 1)
    )
    by = next((k for k in range(verb + 1, len(kept)) if kept[k].low == "by"), None)
    if by is None:
        if asked and any(t.low == "whom" for t in kept[:verb]):
            return "who"
        stranded = verb + 1 < len(kept) and kept[-1].low in _STRANDED
        return "who?" + kept[-1].low if asked and stranded else None
    agent = next(
        (side.keys[k] for k in range(by + 1, len(kept)) if kept[k].low not in _POSSESSIVES),
        None,
    )
    return "who" if agent is None and asked else agent


def _voice(
    one: tuple[_moves.Side, list[_Tok], list[_Tok]],
    other: tuple[_moves.Side, list[_Tok], list[_Tok]],
) -> str:
    """``"changed"``: one side passive, the other active, the agent after "by" (if any)
    standing before the verb on the active side ("Why was my pod evicted by the
    kubelet?" / "Why did the kubelet evict my pod?"); ``"swapped"``: the agent is the
    active side's object ("Can I be sued by my employer?" / "Can I sue my employer?");
    ``""``: the same voice on both sides."""
    (sq, kq, q), (sc, kc, c) = one, other
    pq, pc = _passive(sq, kq, q), _passive(sc, kc, c)
    if (pq is None) == (pc is None):
        return ""
    passive, active = (sq, sc) if pq is not None else (sc, sq)
    at, agent = pq or pc  # type: ignore[misc]
    verb = passive.keys[at]
    if agent is not None and agent.startswith("who?"):  # "Who was it sent to?": no doer
        return "swapped" if "who" in active.keys else "changed"
    if agent is None or verb not in active.keys or agent not in active.keys:
        return "changed"
    if any(active.keys[k + 1] == agent for k, key in enumerate(active.keys[:-1]) if key == "by"):
        return "changed"  # "paid by card" / "pay by card": a means, not an agent
    if agent == "who":  # the doer asked: "who" the active verb's subject ("Who approves")
        w, v = active.keys.index(agent), active.keys.index(verb)
        subject = 0 < v - w <= 2 and "do" not in active.keys[w + 1 : v]
        return "changed" if subject else "swapped"  # "Who did the landlord sue?": its object
    return "changed" if active.keys.index(agent) < active.keys.index(verb) else "swapped"


_OF_LIKE = frozenset({"of", "for", "in", "from"})  # "the return from last year"


def _possessive_explains(q: list[_Tok], c: list[_Tok]) -> bool:
    """ "the capital of Canada" / "Canada's capital", "the mortality rate for India" /
    "India's mortality rate": an "of" (for, in) on one side only, a possessive on the
    other."""
    of_q = sum(t.low in _OF_LIKE for t in q)
    of_c = sum(t.low in _OF_LIKE for t in c)
    return (of_q > of_c and any(t.possessive for t in c)) or (
        of_c > of_q and any(t.possessive for t in q)
    )


# Personal pronouns by person and case ("her" is both: left out)
_PRONOUN_CASE = {
    "i": ("1s", "subject"),
    "me": ("1s", "object"),
    "we": ("1p", "subject"),
    "us": ("1p", "object"),
    "he": ("3m", "subject"),
    "him": ("3m", "object"),
    "she": ("3f", "subject"),
    "they": ("3p", "subject"),
    "them": ("3p", "object"),
}
# "tell me how", "help me to": the requester, not a role in the question
_REQUEST_VERBS = frozenset({"tell", "show", "help", "let", "explain", "teach", "to", "remind"})


def _roles_swapped(q: list[_Tok], c: list[_Tok]) -> Difference | None:
    """The same content words with a person moved between subject and object: "Can my
    employer sue me?" / "Can I sue my employer?", "if my parents give me $50,000" / "if I
    give my parents $50,000". One side has more of that person as a subject and fewer as
    an object than the other."""

    def cases(toks: list[_Tok]) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for i, t in enumerate(toks):
            case = _PRONOUN_CASE.get(t.low)
            if case is None or (case[1] == "object" and i and toks[i - 1].low in _REQUEST_VERBS):
                continue
            out[case] += 1
        return out

    content_q = Counter(sorted(t.lemmas)[0] if t.lemmas else t.low for t in q if t.content)
    content_c = Counter(sorted(t.lemmas)[0] if t.lemmas else t.low for t in c if t.content)
    if content_q != content_c:
        return None
    kq, kc = cases(q), cases(c)
    for person in sorted({p for p, _ in kq} | {p for p, _ in kc}):
        subject = kq[(person, "subject")] - kc[(person, "subject")]
        obj = kq[(person, "object")] - kc[(person, "object")]
        if subject * obj < 0:
            show = " ".join(t.text for t in q if t.low in _PRONOUN_CASE)
            other = " ".join(t.text for t in c if t.low in _PRONOUN_CASE)
            return Difference("order", show, other, True)
    return None


def _word_forms(t: _Tok) -> set[str]:
    """A word's lemmas, its lower-cased text and that without a plural "s" ("IITs")."""
    return set(t.lemmas) | {t.low, _singular(t.low)}


def _without_units(
    q: list[_Tok], c: list[_Tok], pairs: dict[int, int], left_q: list[_Tok], left_c: list[_Tok]
) -> tuple[list[_Tok], list[_Tok], list[Difference], set[int]]:
    """The left-over words without the units that measure a span (:func:`_span_units`),
    their difference (none when there are none) and their ids."""
    units = _span_units(q, c, pairs, (left_q, left_c))  # "my overtime *hours*" / "overtime"
    if not units:
        return left_q, left_c, [], set()
    gone = {id(t) for t in units}
    shown = [" ".join(t.text for t in side if id(t) in gone) for side in (q, c)]
    left_q, left_c = ([t for t in side if id(t) not in gone] for side in (left_q, left_c))
    return left_q, left_c, [Difference("unit", shown[0], shown[1], False)], gone


# units that measure a span: "vacation *days*", "overtime *hours*", "probation *period*"
_SPAN_UNITS = frozenset(
    {"time", "period", "periods"}
    | {u + s for u in ("minute", "hour", "day", "week", "month", "year") for s in ("", "s")}
)


def _span_units(
    q: list[_Tok], c: list[_Tok], pairs: dict[int, int], left: tuple[list[_Tok], list[_Tok]]
) -> list[_Tok]:
    """The left-over units after a word that names a span of time, matched on the other
    side with no unit after it: "How do I log my overtime *hours*?" / "What's the
    overtime logging process?", "vacation *days*" / "vacation". The span is counted in
    its unit, not another thing. Not after a point of the calendar or the clock, whose
    hours are opening hours ("holiday hours" / "holidays"), nor a unit itself."""
    every = left[0] + left[1]
    out = []
    for side, other, links, mine in (
        (q, c, pairs, left[0]),
        (c, q, {j: i for i, j in pairs.items()}, left[1]),
    ):
        matched = set(links.values())
        for t in mine:
            if t.low not in _SPAN_UNITS or t.pos == 0:
                continue
            span = side[t.pos - 1]
            mate = links.get(span.pos)
            if mate is None or not span.content or not _names_span(span):
                continue
            after = other[mate + 1] if mate + 1 < len(other) else None
            if (
                after is None
                or not (after.content or after.low in _SPAN_UNITS)
                or after.pos in matched
            ):
                out.append(t)  # not "overtime hours" / "overtime pay": another head
                out += _counted_as_amount(side, other, span.pos, mate, every)
    return out


def _counted_as_amount(
    side: list[_Tok], other: list[_Tok], at: int, mate: int, left: list[_Tok]
) -> list[_Tok]:
    """ "*many* vacation days" / "*much* vacation": the units counted, the span measured;
    both words, left over, when they stand right before the span on each side."""
    if at == 0 or mate == 0:
        return []
    many, much = side[at - 1], other[mate - 1]
    if (many.low, much.low) != ("many", "much") or not all(
        any(u is w for u in left) for w in (many, much)
    ):
        return []
    return [many, much]


def _names_span(t: _Tok) -> bool:
    """A noun that names a span of time (:func:`_periods`), not one the frames read as a
    time ("weekend", "summer", "Monday") nor a unit."""
    forms = t.lemmas | {t.low}
    if any(f in lx.TEMPORAL_WORDS or f in lx.WEEKDAYS or f in lx.MONTHS for f in forms):
        return False
    if any(_singular(f) in lx.TIME_UNITS or f in _SPAN_UNITS for f in forms):
        return False
    return bool(forms & _periods())


def _without_repeats(
    q: list[_Tok], c: list[_Tok], left_q: list[_Tok], left_c: list[_Tok]
) -> tuple[list[_Tok], list[_Tok], list[_Tok]]:
    """The left-over words without second mentions, and those. A word said twice on one
    side and once on the other ("India ... because India is poor") adds nothing, but
    alignment is one to one, so the second mention is left over."""
    repeats = _repeated(left_q, q, c, left_c) + _repeated(left_c, c, q, left_q)
    if not repeats:
        return left_q, left_c, []
    gone = {id(t) for t in repeats}
    return (
        [t for t in left_q if id(t) not in gone],
        [t for t in left_c if id(t) not in gone],
        repeats,
    )


def _repeated(
    left: Sequence[_Tok], side: Sequence[_Tok], other: Sequence[_Tok], other_left: Sequence[_Tok]
) -> list[_Tok]:
    """The left-over content words of ``side`` that repeat a word ``side`` already says
    and ``other`` says too: a second mention, not a new word. None while ``other`` has a
    new word of its own left over, which the repeat may stand in for ("than the dog" /
    "than the cat" after "the cat")."""
    if any(u.content and not _repeats_any(u, other, side) for u in other_left):
        return []
    return [t for t in left if t.content and _repeats_any(t, side, other)]


def _repeats_any(t: _Tok, side: Sequence[_Tok], other: Sequence[_Tok]) -> bool:
    forms = _word_forms(t)
    return any(u is not t and forms & _word_forms(u) for u in side) and any(
        forms & _word_forms(u) for u in other
    )


def _headed(toks: Sequence[_Tok]) -> dict[str, str]:
    """The direction ("to" or "from") that governs each content word: the first content
    word within three tokens after a directional word of either group."""
    out: dict[str, str] = {}
    for i, t in enumerate(toks):
        way = "to" if t.low in lx.TOWARD else "from" if t.low in lx.AWAY else None
        if way is None:
            continue
        for u in toks[i + 1 : i + 4]:
            if u.low in lx.DIRECTIONAL:
                break
            if u.content:
                for form in u.lemmas or {u.low}:
                    out.setdefault(form, way)
                break
    return out


def _turned(q: Sequence[_Tok], c: Sequence[_Tok]) -> list[Difference]:
    """The same word reached from opposite directions: "from an extrovert to an
    introvert" / "into an extrovert from an introvert" (however the words are ordered)."""
    hq = _headed(q)
    if not hq:
        return []
    for word, way in _headed(c).items():
        if hq.get(word, way) != way:
            return [_diff("direction", [f"{hq[word]} {word}"], [f"{way} {word}"])]
    return []


#: Present-tense forms that differ only in number agreement with their subject ("the
#: docs are" / "the documentation is"): one function word for the equivalence check, as
#: inflection is one word for the content words (tense is compared elsewhere).
_AGREEMENT = {"are": "is", "do": "does", "have": "has", "were": "was"}


def _agreed(word: str) -> str:
    return _AGREEMENT.get(word, word)


def _surface_differences(q: list[_Tok], c: list[_Tok]) -> list[Difference]:
    """What needs no alignment: frames, acronyms, numbers, time, negation, question
    words and tense."""
    diffs: list[Difference] = []
    before = {id(t) for t in (*q, *c) if t.used}
    spelled = _match_joined(q, c) + _match_joined(c, q)
    spelled += _match_acronyms(q, c) + _match_acronyms(c, q)
    # frames read the words an acronym did not take ("NSAIDs" spelled out holds "anti-")
    words_q, words_c = ([t.low for t in side if not t.used or id(t) in before] for side in (q, c))
    for kind, q_words, c_words in frame_differences(words_q, words_c):
        diffs.append(_diff(kind, q_words, c_words))
    diffs += spelled
    diffs += _compare_numbers(q, c)
    tq, tc = _temporal(q), _temporal(c)
    if tq != tc:
        diffs.append(_diff("temporal", sorted(tq - tc), sorted(tc - tq)))
    if _negations(q) % 2 != _negations(c) % 2:
        diffs.append(
            _diff(
                "negation",
                [t.text for t in q if t.low in lx.NEGATIONS],
                [t.text for t in c if t.low in lx.NEGATIONS],
            )
        )
    wq, wc = _questions(q), _questions(c)
    if wq - wc and wc - wq:  # why vs when: a one-sided "why?" adds a request, not a change
        diffs.append(_diff("question", sorted(wq - wc), sorted(wc - wq)))
    else:
        diffs += _polar_against_wh(q, c, wq, wc)
    tense_q, tense_c = _tense(q), _tense(c)
    if tense_q and tense_c and tense_q != tense_c:
        diffs.append(_diff("temporal", [tense_q], [tense_c]))
    return diffs


_SOMEONE = frozenset("someone somebody anyone anybody everyone everybody".split())


def _someone_else(toks: list[_Tok]) -> str:
    """ "someone else" (anybody else, ...) when the text names a person other than the
    asker that way; "" when it does not."""
    for a, b in itertools.pairwise(toks):
        if a.low in _SOMEONE and b.low == "else":
            return f"{a.text} {b.text}"
    return ""


def _unmatched_differences(
    q: list[_Tok], c: list[_Tok], left_q: list[_Tok], left_c: list[_Tok]
) -> list[Difference]:
    """What the words left unaligned on either side say: opposites, entities, a changed
    audience or role."""
    out: list[Difference] = []
    # opposites among every unmatched word (function words too: in/out, on/off)
    for x in left_q:
        for y in left_c:
            if _opposite(x, y):
                out.append(Difference("opposites", x.text, y.text, True))

    for side, name in ((left_q, "query"), (left_c, "candidate")):
        for t in side:
            if t.entity and not t.used:
                out.append(
                    Difference(
                        "entities",
                        t.text if name == "query" else "",
                        t.text if name == "candidate" else "",
                        True,
                    )
                )

    out += _compound_qualifiers(q, c, left_q, left_c)
    eq, ec = _someone_else(q), _someone_else(c)
    if eq != ec:  # "reset *someone else's* password" / "reset my password"
        out.append(Difference("audience", eq, ec, True))
    aud_q, aud_c = _audience(left_q, q), _audience(left_c, c)
    role_q = [t for t in left_q if any(m in lx.AUDIENCE for m in t.lemmas | {t.low})]
    role_c = [t for t in left_c if any(m in lx.AUDIENCE for m in t.lemmas | {t.low})]
    audience = aud_q + aud_c
    if role_q and role_c:  # admin vs guest, children vs adults: a swapped role
        audience = role_q + role_c
    for t in {id(t): t for t in audience}.values():
        q_side = t.text if t in left_q else ""
        out.append(Difference("audience", q_side, "" if q_side else t.text, True))
    return out


#: Content words one side adds, unexplained, from which the addition says more than the
#: other side asks ("How do I share a folder *with the finance team members*?" / "How
#: do I share a folder?"): a qualifier, refused, however close the cosine.
ADDED_WORDS = 3


def _unexplained(
    q: list[_Tok],
    c: list[_Tok],
    left: tuple[list[_Tok], list[_Tok]],
    aligned: tuple[set[int], set[int]],
    unmatched: tuple[list[_Tok], list[_Tok]],
) -> list[Difference]:
    """What the unmatched content words say when nothing refused yet: one or two words
    swapped for others (a substitution), a qualifier one side adds to a near-identical
    question (:func:`_modifiers_added`; at most three words differ, all on that side),
    a phrase of :data:`ADDED_WORDS` content words or more on one side only (a qualifier
    too), or a detail."""
    uq, uc = unmatched
    shared = any(q[i].content for i in aligned[0])
    if uq and uc and shared and len(uq) <= 2 and len(uc) <= 2:
        return [_diff("substitution", [t.text for t in uq], [t.text for t in uc])]
    out = []
    nq = _modifiers_added(q, aligned[0], left[0])
    nc = _modifiers_added(c, aligned[1], left[1])
    one_sided = bool(nq) != bool(nc) and not (uq and uc)
    if one_sided and len({id(t) for t in uq + uc + nq + nc}) <= 3:
        out.append(_diff("qualifier", [t.text for t in nq], [t.text for t in nc]))
    elif bool(uq) != bool(uc) and len(uq or uc) >= ADDED_WORDS:
        # three words or more on one side only: a phrase that says more than the other
        out.append(_diff("qualifier", [t.text for t in uq], [t.text for t in uc]))
    if uq or uc:
        out.append(_diff("detail", [t.text for t in uq], [t.text for t in uc], False))
    return out


def _verb_not_participle(word: str) -> bool:
    """A word that can be a verb and is not its past form ("earn", "creating"); a past
    participle narrows as an adjective does ("*versioned* bucket", "*deleted* photos")."""
    return "VERB" in _readings(word) and not _past_form(word)


def _modifiers_added(toks: list[_Tok], aligned: set[int], left: list[_Tok]) -> list[_Tok]:
    """Words one side adds right before a word both sides share: a modifier that narrows
    what is asked ("*boneless* chicken thighs", "a *service* dog", "a *versioned*
    bucket"). Adverbs ("quickly") and words of manner that only read as adverbs are
    left out: they do not narrow the thing asked about."""
    left = [t for t in left if t.content]
    out = _phrases_added(toks, aligned, [t for t in left if t.low not in lx.FILLER])
    for t in left:
        nxt = toks[t.pos + 1] if t.pos + 1 < len(toks) else None
        if nxt is None or nxt.pos not in aligned or not nxt.content or nxt.low in lx.FILLER:
            continue
        if not _narrows_noun(toks, nxt.pos, aligned):
            continue  # "does it *stay* open", "which *artist* painted": no noun narrowed
        if t.low.endswith("ly") or _readings(t.low) == {"ADV"} or t.low in _DETERMINERS:
            continue  # "quickly", "some", "any": no narrowing (scope is a frame of its own)
        after_determiner = t.pos > 0 and toks[t.pos - 1].low in _HEAD_SKIP
        if t.low in lx.FILLER and not after_determiner:
            continue  # "the best way", "tell me": a filler ("a *guide* dog" is not)
        if _verb_not_participle(t.low) and not after_determiner:
            continue  # "earn money", "creating apps": an action ("a *service* dog" is not)
        out.append(t)
    return out


def _narrows_noun(toks: list[_Tok], at: int, aligned: set[int]) -> bool:
    """Whether the shared word at ``at`` heads a noun, or runs on through shared words
    into one ("an accessible *parking permit*": "parking" reads only as a verb)."""
    for k in range(at, len(toks)):
        t = toks[k]
        if k > at and (t.pos not in aligned or not t.content or t.after_mark):
            return False
        heads = _readings(t.low)
        if t.entity or t.kind == "ident" or "NOUN" in heads or not heads:
            return True
        if "VERB" not in heads or not t.low.endswith("ing"):
            return False  # only an -ing form runs on: "*parking* permit", "*hiking* boots"
    return False


_DETERMINERS = QUANTIFIERS | frozenset(
    "some any many most much more few several all every each both either other another "
    "certain such".split()
)
_QUALIFYING = frozenset("for with without in on at under as".split())


def _phrases_added(toks: list[_Tok], aligned: set[int], left: list[_Tok]) -> list[_Tok]:
    """Words of a prepositional phrase one side adds inside the question: "renew a
    passport *for a minor*", "rent a car *with a debit card*": the phrase holds no word
    of the other side and stands in a sentence that does ("...? Thanks in advance" is a
    sentence of its own)."""
    added = {t.pos for t in left}
    sentence, n = [], 0
    for t in toks:
        n += t.after_stop
        sentence.append(n)
    asked = {sentence[i] for i in aligned}
    out = []
    for i, opener in enumerate(toks):
        if opener.low not in _QUALIFYING or sentence[i] not in asked:
            continue
        end = next(
            (
                k
                for k in range(i + 1, len(toks))
                if toks[k].after_mark
                or (not toks[k].content and toks[k].low not in _HEAD_SKIP | {"of"})
            ),
            len(toks),
        )
        words = [u for u in toks[i + 1 : end] if u.content]
        if words and all(u.pos in added for u in words):
            out += words
    return out


def _compound_qualifiers(
    q: list[_Tok], c: list[_Tok], left_q: list[_Tok], left_c: list[_Tok]
) -> list[Difference]:
    """A hyphenated modifier one side adds, none of its parts matched: "first-time
    customers", "extended-release metformin", "high-yield savings" narrow the question
    to another group or product (an acronym it spells out is matched before this)."""
    out = []
    for toks, left, on_q in ((q, left_q, True), (c, left_c, False)):
        unmatched = {id(t) for t in left}
        groups: dict[int, list[_Tok]] = {}
        for t in toks:
            if t.compound:
                groups.setdefault(t.compound, []).append(t)
        for parts in groups.values():
            if all(id(t) in unmatched for t in parts) and any(t.content for t in parts):
                text = "-".join(t.text for t in parts)
                out.append(
                    Difference("qualifier", text if on_q else "", "" if on_q else text, True)
                )
    return out


def _audience(left: list[_Tok], toks: list[_Tok]) -> list[_Tok]:
    """Unmatched audience/role words that qualify the question ("for kids", "as a guest")."""
    skip = frozenset(
        {
            "a",
            "an",
            "the",
            "my",
            "our",
            "your",
            "their",
            "his",
            "her",
            "new",
            "first",
            "time",
            "young",
            "older",
            "small",
        }
    )
    out = []
    for t in left:
        if not any(lem in lx.AUDIENCE for lem in t.lemmas | {t.low}):
            continue
        i = t.pos - 1
        while i >= 0 and toks[i].low in skip:
            i -= 1
        if (i >= 0 and (toks[i].low in _AS_FOR or toks[i].low in ("class", "plan"))) or (
            t.pos + 1 < len(toks)
            and toks[t.pos + 1].low
            in (
                "class",
                "plan",
                "account",
                "user",
                "users",
                "mode",
            )
        ):
            out.append(t)
        else:
            out.append(t) if t.entity else None
    return out


_WARM = threading.Event()


def warm() -> None:
    """Load the analysis data now (the word-frequency list, stemmer, lemma tables, the
    WordNet synonyms and the compiled rules), once per process, so no request pays for
    it (~0.3 s on 2 cores).

    Example:
        >>> warm()  # idempotent; the second call returns at once
    """
    if _WARM.is_set():
        return
    _Dictionary.frequency("the")
    _stem("resetting")
    _lemmas("passwords")
    _wordnet()
    _action_nouns()
    _attributes()
    analyze("How do I reset my password today?", "How can I reset my passwords tomorrow?")
    _WARM.set()
