"""Frames where word lists fail: modality, temporal relations, quantifier scope and
reversing prefixes (used by :func:`agent_cache.differences.analyze`).

Each frame maps the words of a question to a small set of *classes* and compares the two
questions' classes, so a pair nobody listed is judged by what its words do, not by
whether the pair is in a lexicon:

- **modality**: ability/permission (can, could, may, allowed to), obligation (must, have
  to, need to, required to), advice (should, ought to) and prediction (will, going to)
  ask different questions: "Can I bring my dog?" is not "Do I have to bring my dog?". A
  question with no modal matches one of ability or prediction ("How do I reset" =
  "How can I reset"), never obligation or advice. A question of means ("How should I
  lose weight?", "What can I do to lose weight?") asks for a way whatever its modal.
- **relation**: before / during / after / until place the question in another time
  ("savings earned before the marriage" vs "during the marriage"); one side naming a
  relation the other does not have also refuses.
- **scope**: universal (every, all, each), single (one, a single, only one), existential
  (some, several) and none differ when both sides quantify.
- **reversal**: words that are the same stem under opposing prefixes (onboard/offboard,
  upload/download, inbound/outbound, overpaid/underpaid, import/export) and one-sided
  reversing modifiers (former, ex-, non-, anti-, pseudo-, step-) are opposites; this runs
  on the raw words, before any typo matching could read "offboard" as a typo of
  "onboard".
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_cache import lexicon as lx

__all__ = ["MODAL_PREDICATES", "ONCE_SUBJECTS", "QUANTIFIERS", "STEP_NOUNS", "frame_differences"]

_MODAL_PHRASES: dict[tuple[str, ...], str] = {
    ("have", "to"): "obligation",
    ("has", "to"): "obligation",
    ("had", "to"): "obligation",
    ("need", "to"): "obligation",
    ("needs", "to"): "obligation",
    ("required", "to"): "obligation",
    ("obliged", "to"): "obligation",
    ("obligated", "to"): "obligation",
    ("supposed", "to"): "obligation",
    ("ought", "to"): "advice",
    ("able", "to"): "ability",
    ("allowed", "to"): "ability",
    ("permitted", "to"): "ability",
    ("possible", "to"): "ability",
    ("going", "to"): "prediction",
}
_MODALS = {
    "can": "ability",
    "could": "ability",
    "may": "ability",
    "might": "ability",
    "can't": "ability",
    "cannot": "ability",
    "couldn't": "ability",
    "must": "obligation",
    "mustn't": "obligation",
    "needn't": "obligation",
    "mandatory": "obligation",
    "compulsory": "obligation",
    "required": "obligation",  # "What documents are required for ...?": what I need
    "necessary": "obligation",
    "deadline": "obligation",  # "the deadline for filing" is when one must file
    "deadlines": "obligation",
    "due": "obligation",  # "When is my rent due?", "the due date"; not "due to"
    "allowed": "ability",  # "Is smoking allowed on the balcony?": whether one can
    "permitted": "ability",
    "possible": "ability",  # "Is a visa extension possible?"
    "available": "ability",  # "Is reimbursement available?": whether one can get it
    "should": "advice",
    "shouldn't": "advice",
    "shall": "advice",
    "will": "prediction",
    "would": "prediction",
    "won't": "prediction",
    "wouldn't": "prediction",
}
#: The modal words that are adjectives, participles or nouns ("allowed", "required",
#: "deadline"; every word of ``_MODALS`` but the modal verbs and contractions): content
#: words to the aligner, the frame's to the reader.
_MODAL_VERBS = frozenset("can could may might cannot must should shall will would".split())
MODAL_PREDICATES = frozenset(w for w in _MODALS if w.isalpha() and w not in _MODAL_VERBS)
# a question with no modal matches these classes (procedure, plain future, and the
# value a wh-question asks to be recommended: "How often should I rotate my tires?" is
# "How often do I rotate my tires?" and "the recommended frequency for tire rotation")
_UNMARKED_OK = frozenset({"ability", "prediction", "recommendation", "intent"})

_RELATIONS = {
    "before": "before",
    "prior": "before",
    "ahead": "before",
    "pre": "before",
    "after": "after",
    "following": "after",
    "afterwards": "after",
    "afterward": "after",
    "post": "after",
    "during": "during",
    "while": "during",
    "throughout": "during",
    "amid": "during",
    "until": "until",
    "till": "until",
    "since": "since",
    "within": "within",
    "once": "after",  # "once it has shipped": a conjunction (see _relations)
}
# after "once", a subject makes it a conjunction ("once *it* ships"), not a count
ONCE_SUBJECTS = frozenset(
    "i you he she it we they my your his her its our their the this that".split()
)
_DETERMINERS = frozenset({"the", "a", "an", "my", "your", "our", "their", "his", "her", "this"})

_SCOPE = {
    "every": "all",
    "all": "all",
    "each": "all",
    "both": "all",
    "entire": "all",
    "whole": "all",
    "one": "one",
    "single": "one",
    "only": "one",
    "some": "some",
    "any": "some",  # "Do *any* of my credits transfer?": at least one, not all
    "several": "some",
    "few": "some",
    "many": "some",
    "most": "some",
    "none": "none",
    "neither": "none",
}

_PREFIX_PAIRS = (
    ("on", "off"),
    ("up", "down"),
    ("in", "out"),
    ("over", "under"),
    ("im", "ex"),
    ("inter", "intra"),
    ("pre", "post"),
    ("en", "de"),
    ("inc", "dec"),
    ("max", "min"),
)
_REVERSING_MODIFIERS = frozenset({"former", "ex", "non", "anti", "pseudo"})
_REVERSING_PREFIXES = ("ex-", "non-", "anti-", "pseudo-", "step-", "counter-", "de-", "un-")


# A request wrapper: "I need to know how ...", "I have to find out whether ...": the
# speaker's need to learn an embedded question, said in place of asking it; the modal is
# the request's, not the question's (which is the embedded clause after the wh-word).
_LEARN_VERBS = frozenset({"know", "learn", "understand", "find", "figure", "ask"})
_EMBEDDED = frozenset(
    {"how", "what", "why", "when", "where", "which", "who", "whom", "whose", "whether", "if"}
)


def _wrapper(words: Sequence[str], i: int) -> bool:
    """Whether the modal phrase at ``i`` (two words) opens a request wrapper: a
    sentence-initial "I" before it (after an opener at most), a verb of learning after it
    ("find out", "figure out" included) and then an embedded question."""
    if i < 1 or words[i - 1] != "i" or not (i == 1 or words[i - 2] in lx.OPENERS):
        return False
    j = i + 2
    if j >= len(words) or words[j] not in _LEARN_VERBS:
        return False
    j += 2 if words[j] in ("find", "figure") and j + 1 < len(words) and words[j + 1] == "out" else 1
    return j < len(words) and words[j] in _EMBEDDED


def _intent(words: Sequence[str], i: int) -> bool:
    """ "I need to cancel my order", "We have to renew our lease": a sentence-initial "I"
    or "we" (after an opener at most) saying what they are to do asks how to, as "How do
    I ...?" does (a question with no modal), not whether they must ("Do I need to ...?")
    nor whether they can ("Can I ...?")."""
    return (
        words[i] in ("need", "have")
        and i >= 1
        and words[i - 1] in ("i", "we")
        and (i == 1 or words[i - 2] in lx.OPENERS)
    )


# A question of means: "How can I lose weight?", "How should I lose weight?", "What
# should I do to lose weight?", "What can be done to ...": the modal asks for a way, and
# every modal (or none: "How do I lose weight?") asks for the same way. Only a bare "how"
# or "what ... do/be done" before it: "how much can I", "how long should I" ask a limit or
# a recommendation, and a polar "Can I ...?" / "Must I ...?" asks the modality itself.
_AGENTS = frozenset({"i", "we", "you", "one", "someone", "somebody", "people", "they"})
# what a question of means may ask for after "what": "What *steps* should I take to ...?"
STEP_NOUNS = frozenset("steps step actions action measures".split())


def _means(words: Sequence[str], i: int) -> bool:
    """Whether the modal at ``i`` asks for a means (see above)."""
    if i < 1 or i + 1 >= len(words):
        return False
    before, after = words[i - 1], words[i + 1]
    if before == "how":
        return after in _AGENTS and (i < 2 or words[i - 2] not in ("know", "matter"))
    rest = words[i + 2 : i + 4]
    if before in STEP_NOUNS and i >= 2 and words[i - 2] == "what":  # "What steps should I take"
        return after in _AGENTS and rest[:1] in (["do"], ["take"], ["follow"])
    if before != "what":
        return False
    return (after in _AGENTS and rest[:1] == ["do"]) or (after == "be" and rest[:1] == ["done"])


def _means_phrase(words: Sequence[str], i: int) -> bool:
    """ "What do I need to do to ...?", "What do we have to do to ...?", "What steps do
    I need to take to ...?": the two-word modal at ``i`` in a question of means (see
    :func:`_means`)."""
    if i < 3 or words[i - 2] not in ("do", "does") or words[i - 1] not in _AGENTS:
        return False
    if words[i - 3] == "what":
        return words[i + 2 : i + 3] == ["do"]
    return (
        i >= 4
        and words[i - 4] == "what"
        and words[i - 3] in STEP_NOUNS
        and words[i + 2 : i + 3] in (["do"], ["take"], ["follow"])
    )


def _plan(words: Sequence[str], i: int) -> bool:
    """ "What would you do ...?", "What will we do ...?": a plan or a choice, not a way,
    so never the same question as "What should you do ...?"."""
    return (
        _MODALS.get(words[i]) == "prediction"
        and _means(words, i)
        and words[i - 1] == "what"
        and words[i + 1] in _AGENTS
    )


_MEASURES = frozenset("often long much many far soon early late frequently".split())
# the one a recommendation is for, said generically: "should *a* toddler", "should *an* adult"
_GENERIC = frozenset({"a", "an"})


def _recommends(words: Sequence[str], i: int) -> bool:
    """Whether the advice modal at ``i`` asks for a recommended amount or time: "How
    often should I ...", "How long should I ...", "When should I ...", an agent after
    it. The polar "Should I ...?" asks the advice itself, and "What should I wear?" /
    "Which one should I choose?" a choice, not the same question as "What is ...?"."""
    if i < 1 or i + 1 >= len(words) or words[i + 1] not in _AGENTS | _GENERIC:
        return False
    before = words[i - 1]
    if before == "when" or (
        # "how" or its phrase read as one word ("how long" holds "long" after it)
        before in _MEASURES
        and i >= 2
        and (words[i - 2] == "how" or words[i - 2].startswith("how "))
    ):
        return True
    # "How much ibuprofen should an adult take?", "How many hours of sleep should I get?"
    for j in range(max(0, i - 7), i - 1):
        if words[j] == "how" and words[j + 1] in ("much", "many"):
            between = words[j + 2 : i]
        elif words[j].startswith(("how much ", "how many ")):  # one token: "how many hours"
            between = words[j + 1 : i]
        else:
            continue
        return bool(between) and all(
            w.isalpha() and w not in _MODALS and w not in _EMBEDDED for w in between
        )
    return False


def _polite_possible(words: Sequence[str], i: int) -> bool:
    """ "*Would* it be possible to ...?", "*Would* you be able to ...?": the conditional
    of politeness, asking what "Is it possible" / "Can you" asks (the ability is said by
    "possible" / "able"), no prediction."""
    return (
        words[i] in ("would", "could")
        and words[i + 2 : i + 4] in (["be", "possible"], ["be", "able"])
        and words[i + 1] in _AGENTS | {"it"}
    )


# before the one who needs a thing, in a question of what is required
_NEED_ASKED = frozenset({"do", "does", "did", "if", "whether"})


def _modal_classes(words: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for i, w in enumerate(words):
        pair = (w, words[i + 1]) if i + 1 < len(words) else None
        if pair in _MODAL_PHRASES:
            if _wrapper(words, i) or _means_phrase(words, i):
                continue
            if _intent(words, i):  # "I need to cancel my order": how, not whether
                out.add("intent")
                continue
            out.add(_MODAL_PHRASES[pair])
        elif w in ("need", "needs") and i >= 2 and words[i - 2] in _NEED_ASKED:
            # "Do I need a visa?", embedded "(Can you tell me) if I need a visa": what
            # is required
            out.add("obligation")
        elif w in _MODALS:
            if _plan(words, i):
                out.add("plan")
                continue
            if _means(words, i) and not w.endswith("n't") and w != "cannot":
                continue
            if _MODALS[w] == "advice" and not w.endswith("n't") and _recommends(words, i):
                out.add("recommendation")
                continue
            if _polite_possible(words, i):  # "Would it be possible to ...": ability
                continue
            if w == "due" and words[i + 1 : i + 2] == ["to"]:
                continue  # "due to the holiday": because of
            # "will" as a noun ("a will", "my will") is not a modal
            if w == "will" and i and words[i - 1] in ("a", "my", "the", "your", "his", "her"):
                continue
            # "may" the month before a number or after "in"/"of"
            if w == "may" and (
                (i + 1 < len(words) and words[i + 1][:1].isdigit())
                or (i and words[i - 1] in ("in", "of", "since", "until", "by"))
            ):
                continue
            out.add(_MODALS[w])
    return out


def _relations(words: Sequence[str]) -> set[str]:
    out = set()
    for i, w in enumerate(words):
        rel = _RELATIONS.get(w)
        if rel is None:
            continue
        if w == "prior" and not (i + 1 < len(words) and words[i + 1] == "to"):
            continue
        if w == "ahead" and not (i + 1 < len(words) and words[i + 1] == "of"):
            continue
        if w == "following" and i and words[i - 1] in ("the", "a"):
            continue  # "the following steps"
        if w == "once" and not (i + 1 < len(words) and words[i + 1] in ONCE_SUBJECTS):
            continue  # "once a day": a count
        if w == "since" and i + 1 < len(words) and words[i + 1] in ("i", "we", "you", "it"):
            continue  # "since I moved" is often causal: leave it to the similarity
        out.add(rel)
    return out


#: The words of quantifier scope: compared as frames, never matched as synonyms.
QUANTIFIERS = frozenset(_SCOPE)


def _relation_heads(words: Sequence[str]) -> dict[str, frozenset[str]]:
    """The relations each word right after a relation word falls under ("wait *before*
    eating *after* taking": eating -> before, taking -> after; "*before and after* a
    run": run -> both), determiners skipped."""
    out: dict[str, frozenset[str]] = {}
    pending: set[str] = set()
    for i, w in enumerate(words):
        rel = _RELATIONS.get(w)
        if rel is None:
            continue
        pending.add(rel)
        j = i + 1
        while j < len(words) and words[j] in _DETERMINERS:
            j += 1
        if j >= len(words):
            break
        if words[j] in lx.SYMMETRIC and j + 1 < len(words) and words[j + 1] in _RELATIONS:
            continue  # "before and after ...": the next relation's word takes both
        if words[j] not in _RELATIONS and words[j] not in out:
            out[words[j]] = frozenset(pending)
        pending = set()
    return out


def _scope(words: Sequence[str]) -> set[str]:
    out = set()
    for i, w in enumerate(words):
        cls = _SCOPE.get(w)
        if cls is None:
            continue
        if w == "one" and i + 1 < len(words) and words[i + 1] == "another":
            continue  # "one another"
        if w in ("many", "much") and i and words[i - 1] in ("how", "how many", "how much"):
            continue  # "how many" asks a number: not a quantifier
        if w == "only" and not (i + 1 < len(words) and words[i + 1] in ("one", "a", "the")):
            continue
        out.add(cls)
    return out


_OPPOSITE = {p1: p2 for p1, p2 in _PREFIX_PAIRS} | {p2: p1 for p1, p2 in _PREFIX_PAIRS}


_BY_HEAD: dict[str, tuple[str, ...]] = {}
for _p in _OPPOSITE:
    _BY_HEAD[_p[:2]] = (*_BY_HEAD.get(_p[:2], ()), _p)


def _stems(word: str) -> list[tuple[str, str]]:
    """``(prefix, stem)`` for each opposing prefix ``word`` starts with (stem >= 3)."""
    return [
        (p, word[len(p) :].lstrip("-"))
        for p in _BY_HEAD.get(word[:2], ())
        if word.startswith(p) and len(word) - len(p) >= 3
    ]


def _reversals(only_q: set[str], only_c: set[str]) -> list[tuple[str, str]]:
    """Pairs of words, one per side, that are one stem under opposing prefixes, or one
    word and its reversing-prefixed form (``ex-wife``/``wife``, ``nonprofit``/``profit``).
    Linear in the words: stems are looked up, not compared pairwise."""
    found: list[tuple[str, str]] = []
    by_stem: dict[tuple[str, str], str] = {}
    for y in only_c:
        for prefix, stem in _stems(y):
            by_stem[(prefix, stem)] = y
    for x in sorted(only_q):
        for prefix, stem in _stems(x):
            match = by_stem.get((_OPPOSITE[prefix], stem))
            if match is not None:
                found.append((x, match))
    for side, other, flip in ((only_q, only_c, False), (only_c, only_q, True)):
        for x in sorted(side):
            if "-" not in x and not x.startswith("non"):
                continue
            for prefix in _REVERSING_PREFIXES:
                bare = x[len(prefix) :] if x.startswith(prefix) else ""
                if not bare and x.startswith("non") and len(x) >= 7:
                    bare = x[3:]
                if bare and bare in other:
                    found.append((bare, x) if flip else (x, bare))
                    break
    return found


def _unmarked_ok(classes: set[str], unmarked: Sequence[str]) -> bool:
    """Whether a question with no modal (``unmarked``) matches one of ``classes``. A
    recommendation matches only an impersonal question ("the recommended frequency for
    tire rotation"): "How often do you drink coffee?" asks a habit."""
    if not classes <= _UNMARKED_OK:
        return False
    return "recommendation" not in classes or not _AGENTS & set(unmarked)


def frame_differences(
    query: Sequence[str], candidate: Sequence[str]
) -> list[tuple[str, list[str], list[str]]]:
    """``(kind, query side, candidate side)`` for every frame that differs; ``query`` and
    ``candidate`` are the lower-cased words of the two questions."""
    out: list[tuple[str, list[str], list[str]]] = []
    mq, mc = _modal_classes(query), _modal_classes(candidate)
    if mq != mc:
        one_sided = (not mq and _unmarked_ok(mc, query)) or (not mc and _unmarked_ok(mq, candidate))
        if not one_sided:
            out.append(("modality", sorted(mq), sorted(mc)))
    rq, rc = _relations(query), _relations(candidate)
    if rq and rc and rq != rc:  # before vs during; a relation on one side is a detail
        out.append(("relation", sorted(rq - rc), sorted(rc - rq)))
    elif rq and rq == rc:  # the same relations around other words: their order turned
        hq, hc = _relation_heads(query), _relation_heads(candidate)
        turned = sorted(w for w in hq.keys() & hc.keys() if hq[w] != hc[w])
        if turned:
            out.append(
                ("relation", [f"{hq[w]} {w}" for w in turned], [f"{hc[w]} {w}" for w in turned])
            )
    sq, sc = _scope(query), _scope(candidate)
    if sq and sc and sq != sc:
        out.append(("scope", sorted(sq - sc), sorted(sc - sq)))
    qset, cset = set(query), set(candidate)
    only_q, only_c = qset - cset, cset - qset
    for x, y in _reversals(only_q, only_c):
        out.append(("opposites", [x], [y]))
    mods_q = only_q & _REVERSING_MODIFIERS
    mods_c = only_c & _REVERSING_MODIFIERS
    if mods_q or mods_c:
        out.append(("qualifier", sorted(mods_q), sorted(mods_c)))
    return out
