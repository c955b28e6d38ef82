"""The semantic layer's decision: which stored question, if any, may answer the query.

Pure logic, shared by :class:`~agent_cache.cache.LayeredCache`, ``agent-cache calibrate``
and the benchmarks, so that what is measured is exactly what is served:

1. every candidate from the k-NN search is compared with the query by the difference
   analysis (:func:`agent_cache.differences.analyze`); a meaningful difference refuses it
   (counted by reason);
2. a candidate that is *equivalent* to the query (the same words up to typos, inflection,
   synonyms and acronyms) may be served from :data:`EQUIVALENT_FLOOR`; any other one needs
   the namespace's similarity threshold;
3. with a verifier (a cross-encoder), the candidates still standing are scored. A verifier
   trained by ``agent-cache train-verifier`` carries a calibrated combiner (cosine,
   verifier score and the difference features in one logistic model) and its cut; a
   verifier without one (a hub reranker) can only veto, at ``rerank_threshold``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agent_cache.differences import Analysis, Difference, analyze, shared_ends
from agent_cache.errors import ConfigurationError

__all__ = [
    "COMBINER_FILE",
    "EQUIVALENT_FLOOR",
    "Candidate",
    "Combiner",
    "Focus",
    "SemanticPolicy",
    "Verdict",
    "finish",
    "focus",
    "in_context",
    "model_checked",
    "reread",
    "reread_checked",
    "screen",
    "synonym_floor",
    "synonym_probes",
]

#: Cosine similarity from which a candidate *equivalent* to the query (same words up to
#: typos, inflection, synonyms, acronyms) is served. Typos move MiniLM vectors a lot
#: ("whats the weahter in london" vs "what's the weather in london": 0.53).
EQUIVALENT_FLOOR = 0.5
#: Cosine similarity from which a candidate *reworded* from the query (every content
#: word matched, but as its noun or verb, with fillers or other function words:
#: "How do I renew my lease?" / "What's the lease renewal process?") is served. MiniLM
#: puts such pairs at 0.72-0.79 ("passport renewal process" 0.777, "account cancellation
#: steps" 0.764, "How do I apply for a mortgage?" / "What's the mortgage application
#: process?" 0.738); Quora's pairs hold no such frame under 0.775 and no trap of any
#: suite is reworded, so the floor costs nothing there.
REWORDED_FLOOR = 0.70
#: The file a trained verifier's combiner is saved in, beside the model.
COMBINER_FILE = "agent_cache_combiner.json"
#: Characters of a text the embedder is trusted to have read: MiniLM reads 256 word pieces
#: (~1,000 characters of English prose, fewer for code, numbers or other scripts), so a
#: difference past this point may be invisible to the cosine.
EMBEDDER_WINDOW_CHARS = 600
#: A common prefix + suffix at least this long is a shared part (a pasted document, a
#: system preamble): the two texts are then judged on what differs between them.
SHARED_MIN_CHARS = 80
#: How much of a prompt the vector store keeps as the candidate's text (the focus step
#: below needs the whole candidate; past this the unseen tail counts as different).
MAX_CANDIDATE_CHARS = 100_000
_BOUNDARY = frozenset(".?!;:\n")
#: The model check of a substitution (:func:`synonym_probes`): a candidate refused only
#: because one word (or two-word phrase) replaced another is served when the embedder
#: says the swap moves the query's meaning at most this fraction of what deleting the
#: word moves it ("signs" -> "symptoms": 0.12 to 0.17, "set" -> "configure": 0.36;
#: "delete" -> "rename": 0.88, "buy" -> "rent": 1.75, on the trap suite none under 0.46).
SYNONYM_MOVE_RATIO = 0.40
#: ... and its cosine is at least this (between :data:`EQUIVALENT_FLOOR` and the default
#: threshold: a swap the model explains is not a pure rewording).
SYNONYM_FLOOR = 0.80
#: ... and at most this far below the namespace's threshold (:func:`synonym_floor`):
#: 0.80 at the default 0.92, higher for a stricter threshold, so that raising the
#: threshold still buys precision (on unseen Quora pairs the model check alone held
#: precision near 0.94 at any threshold with a fixed floor).
SYNONYM_MARGIN = 0.12


def synonym_floor(threshold: float) -> float:
    """The lowest cosine the model check may serve at under ``threshold``."""
    return max(SYNONYM_FLOOR, threshold - SYNONYM_MARGIN)


#: The model check of a pair *synonymous* by WordNet
#: (:attr:`~agent_cache.differences.Analysis.synonymous`: one sense of each word is the
#: same), below the threshold: two signals must agree, so the embedder's bar is looser
#: than for an unexplained swap ("halt" -> "stop" 0.41, "purpose" -> "function" 0.64;
#: a WordNet sense the question does not mean moves it more: "boss so mean" -> "so
#: average" 1.60).
LEXICAL_MOVE_RATIO = 0.80
#: The model check in context: a swap of content words whose two spans, read as the
#: model reads them inside their own sentences (last-layer token states,
#: :func:`~agent_cache.embedders.span_encoder`), sit at least this close, and closer
#: than the same words out of context, is explained when it moves the query no more
#: than deleting the word does. Context that pulls two words together means one sense
#: of both ("pay" / "cover" in a health-plan question, "booking" / "reservation");
#: words of one kind stay as close as they were ("freezer" / "fridge" 0.63 in context,
#: 0.66 bare; "loosen" / "tighten" 0.63 and 0.78).
CONTEXT_FLOOR = 0.60
#: ... and the cosine the move is measured against: move <= this x drop.
CONTEXT_MOVE_RATIO = 1.0
_MASK = "something"


@dataclass(frozen=True)
class Focus:
    """What a long pair is judged on: the differing spans, or a refusal.

    Attributes:
        query: the query's differing span, extended to whole sentences ("" if none).
        candidate: the candidate's differing span, likewise.
        shared: characters the two texts share (common prefix + common suffix).
        reason: ``"unseen_difference"`` (the texts differ beyond what the embedder read)
            or ``"long_difference"`` (the differing spans are themselves too long to
            judge); ``""`` when the spans are to be judged.
    """

    query: str
    candidate: str
    shared: int
    reason: str = ""


@functools.lru_cache(maxsize=64)
def _flat(text: str) -> tuple[str, str]:
    """``text`` with its whitespace collapsed, and that lower-cased (once per text: one
    query meets up to 4 x top_k candidates)."""
    flat = " ".join(text.split())
    return flat, flat.lower()


def _sentence_start(text: str, at: int) -> int:
    i = at
    while i > 0 and text[i - 1] not in _BOUNDARY:
        i -= 1
    return i


def _sentence_end(text: str, at: int) -> int:
    i = at
    while i < len(text) and text[i] not in _BOUNDARY:
        i += 1
    return min(len(text), i + 1)


def focus(query: str, candidate: str) -> Focus | None:
    """Where a pair of texts differs, for texts the embedding cannot be trusted on alone.

    ``None`` for two short texts (at most :data:`EMBEDDER_WINDOW_CHARS`) sharing no long
    part: the cosine saw all of both, and the normal decision applies. Otherwise the
    common prefix and suffix (a document pasted with a question, before or after it) are
    the shared scope and the differing middle spans, widened to whole sentences, are what
    must be the same question: the caller embeds and judges those. Two long texts that
    share no such part, or whose differing spans are long, are refused: part of what
    differs was never read by the embedder.

    Example:
        >>> doc = "The supplier shall deliver the goods within 30 days. " * 4
        >>> f = focus(doc + "Who are the parties?", doc + "What law governs it?")
        >>> (f.query, f.candidate, f.reason)
        ('Who are the parties?', 'What law governs it?', '')
        >>> focus("How do I reset my password?", "how can I reset my password") is None
        True
    """
    (q, ql), (c, cl) = _flat(query), _flat(candidate)
    if len(ql) != len(q) or len(cl) != len(c):  # case folding changed a length: compare raw
        ql, cl = q, c
    prefix, suffix = shared_ends(ql, cl)
    shared = prefix + suffix
    longest = max(len(q), len(c))
    if shared < SHARED_MIN_CHARS:
        if longest <= EMBEDDER_WINDOW_CHARS:
            return None
        return Focus(q, c, shared, "unseen_difference")
    start = _sentence_start(q, prefix)  # the shared prefix is the same in both texts
    tail = suffix
    # the end of the sentence the differing span ends in, measured from the shared suffix
    qend = _sentence_end(q, len(q) - tail) if tail else len(q)
    cend = len(c) - (len(q) - qend)
    qs, cs = q[start:qend].strip(), c[start:cend].strip()
    if not qs and not cs:  # the same text up to case and spacing: judge its last sentence
        qs = cs = q[_sentence_start(q, len(q) - 1) :].strip() or q[-EMBEDDER_WINDOW_CHARS:]
    if max(len(qs), len(cs)) > EMBEDDER_WINDOW_CHARS:
        return Focus(qs, cs, shared, "long_difference")
    if qs == q.strip() and cs == c.strip():  # one sentence each: the cosine saw all of it
        return None
    if len(query) > MAX_CANDIDATE_CHARS or len(candidate) >= MAX_CANDIDATE_CHARS:
        return Focus(qs, cs, shared, "unseen_difference")  # the stored text was cut
    return Focus(qs, cs, shared)


@dataclass(frozen=True)
class Candidate:
    """A k-NN result: the stored question, its entry key and its cosine similarity."""

    id: str
    key: str
    text: str
    similarity: float


@dataclass(frozen=True)
class Verdict:
    """What the semantic layer decided about one candidate.

    Attributes:
        outcome: ``"serve"``, ``"refused"`` (a meaningful difference, or the verifier),
            ``"below_threshold"`` or ``"verify"`` (waiting for the verifier's score).
        reason: the refusal reason (``"opposites"``, ``"verifier"``, ...) or ``""``.
        score: what the decision compared with its cut: the cosine, or the combiner's
            probability when a trained verifier decided.
        verifier: the verifier's score, when one ran.
    """

    candidate: Candidate
    outcome: str
    reason: str = ""
    score: float = 0.0
    analysis: Analysis | None = None
    verifier: float | None = None


@dataclass(frozen=True)
class Combiner:
    """Logistic model over (cosine, verifier logit, difference features) with its cut.

    Written by ``agent-cache train-verifier`` from labeled pairs held out of training;
    ``cut`` is the probability from which the lower 95 % confidence bound on precision
    met ``target_precision`` on those pairs.
    """

    weights: dict[str, float]
    cut: float
    min_similarity: float
    target_precision: float | None = None
    precision_bound: float | None = None
    measured: dict[str, Any] = field(default_factory=dict)

    def probability(self, features: dict[str, float]) -> float:
        z = self.weights.get("bias", 0.0) + sum(
            w * features.get(name, 0.0) for name, w in self.weights.items() if name != "bias"
        )
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / COMBINER_FILE
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> Combiner | None:
        """The combiner saved beside a verifier model, or ``None`` if there is none."""
        path = Path(directory) / COMBINER_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(**data)
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigurationError(f"cannot read verifier combiner {path}: {exc}") from exc


def features(similarity: float, verifier: float | None, analysis: Analysis) -> dict[str, float]:
    """The combiner's inputs for one candidate."""
    v = min(1 - 1e-6, max(1e-6, verifier if verifier is not None else 0.5))
    kinds = {d.kind for d in analysis.differences}
    return {
        "similarity": similarity,
        "verifier_logit": math.log(v / (1 - v)),
        "equivalent": float(analysis.equivalent),
        "detail": float("detail" in kinds),
        "synonym": float("synonym" in kinds or "acronym" in kinds),
        "typo": float("typo" in kinds),
        "derived": float("derived" in kinds),
    }


@dataclass(frozen=True)
class SemanticPolicy:
    """The operating point of one namespace.

    Attributes:
        threshold: cosine similarity a non-equivalent candidate needs.
        floor: cosine similarity an equivalent candidate needs.
        rerank_threshold: minimum verifier score (a verifier without a combiner).
        combiner: the trained combiner, when the verifier has one.
        case_sensitive: letter case matters (code).
    """

    threshold: float
    floor: float = EQUIVALENT_FLOOR
    rerank_threshold: float = 0.5
    combiner: Combiner | None = None
    case_sensitive: bool = False

    @property
    def lowest(self) -> float:
        """No candidate below this similarity can be served."""
        low = min(self.threshold, self.floor)
        if self.combiner is not None:
            low = min(low, self.combiner.min_similarity)
        return low


@dataclass(frozen=True)
class SynonymProbe:
    """One refused substitution for the model check: the verdict, the text the analysis
    read as the query (the whole query, or its differing span in a long turn) and that
    text with the replaced span masked."""

    index: int
    text: str
    masked: str
    lexical: bool = False  # a WordNet synonym below the threshold, not a refusal
    #: for the check in context (:data:`CONTEXT_FLOOR`): the candidate's text and the
    #: character spans of the swapped words in each; empty when the swap is not of
    #: content words (a quantifier, a function word, a number)
    candidate: str = ""
    spans: tuple[tuple[int, int], tuple[int, int]] | None = None
    #: the candidate's question as asked, when the analysis read past courtesy or a
    #: greeting (:attr:`~agent_cache.differences.Analysis.asked`): the swap's move is
    #: then measured between the two questions, not the two messages
    against: str = ""

    def context_items(self) -> list[tuple[str, int, int]]:
        """The two spans in their sentences, for ``span_vectors``; [] when none."""
        if self.spans is None:
            return []
        (qs, qe), (cs, ce) = self.spans
        return [(self.text, qs, qe), (self.candidate, cs, ce)]

    def bare_words(self) -> list[str]:
        """The two swapped spans on their own, to embed out of context; [] when none."""
        if self.spans is None:
            return []
        (qs, qe), (cs, ce) = self.spans
        return [self.text[qs:qe], self.candidate[cs:ce]]


def _span_pattern(words: Sequence[str]) -> str:
    return r"(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)"


def _content_swap(q_words: Sequence[str], c_words: Sequence[str]) -> bool:
    """Both sides of a swap are content words: no quantifier ("all" / "any" is a scope,
    judged as a frame), function word, digit or symbol."""
    from agent_cache import lexicon as lx
    from agent_cache._frames import QUANTIFIERS

    words = [w.lower() for w in (*q_words, *c_words)]
    return (
        bool(q_words)
        and bool(c_words)
        and all(w.isalpha() and w not in lx.FUNCTION_WORDS and w not in QUANTIFIERS for w in words)
    )


def synonym_probes(verdicts: Sequence[Verdict], floor: float = SYNONYM_FLOOR) -> list[SynonymProbe]:
    """The best verdict the model check may explain, with the texts it embeds: refused
    for one unexplained substitution of at most two words, or below the threshold and
    *synonymous* by WordNet (one swapped word), at a cosine from ``floor``
    (:func:`synonym_floor` of the threshold);
    none when a candidate is servable already. One probe at most: one new text to embed
    (the query itself is in the embedder's memo), so the check costs one short
    embedding."""
    if any(v.outcome in ("serve", "verify") for v in verdicts):
        return []
    for i, v in sorted(enumerate(verdicts), key=lambda iv: -iv[1].score):
        a = v.analysis
        if a is None or v.score < floor:
            continue
        lexical = v.outcome == "below_threshold" and a.synonymous
        if lexical:
            swaps = [d for d in a.differences if d.kind == "lexical"]
            if len(swaps) != 1:
                continue
            span = swaps[0].query.split()
        elif v.outcome == "refused" and v.reason == "substitution" and len(a.refusals) == 1:
            span = a.refusals[0].query.split()
            if not a.refusals[0].candidate:
                continue
        else:
            continue
        if not span or len(span) > 2:
            continue
        pattern = _span_pattern(span)
        text, against = a.asked if a.asked[0] else (a.query, "")
        masked, n = re.subn(pattern, _MASK, text, count=1, flags=re.IGNORECASE)
        if n:
            spans = _context_spans(a, span, lexical)
            return [SynonymProbe(i, text, masked, lexical, *spans, against=against)]
    return []


def _context_spans(
    a: Analysis, span: Sequence[str], lexical: bool
) -> tuple[str, tuple[tuple[int, int], tuple[int, int]] | None]:
    """The candidate's text and where the swapped words sit in each text, for the check
    in context; ``("", None)`` for a WordNet synonym (checked as before) or a swap that
    is not of content words, or words not found as written."""
    if lexical or len(a.refusals) != 1:
        return "", None
    other = a.refusals[0].candidate.split()
    if len(other) > 2 or not _content_swap(span, other):
        return "", None
    query, candidate = a.asked if a.asked[0] else (a.query, a.candidate)
    mq = re.search(_span_pattern(span), query, flags=re.IGNORECASE)
    mc = re.search(_span_pattern(other), candidate, flags=re.IGNORECASE)
    if mq is None or mc is None:
        return "", None
    return candidate, ((mq.start(), mq.end()), (mc.start(), mc.end()))


def in_context(in_sentence: Sequence[Any], bare: Sequence[Any]) -> tuple[float, float] | None:
    """(cosine of the two swapped spans read in their sentences, cosine of the same words
    embedded bare), from the unit vectors of :meth:`SynonymProbe.context_items` and
    :meth:`SynonymProbe.bare_words`; ``None`` when a span had no vector."""
    if len(in_sentence) != 2 or len(bare) != 2 or any(x is None for x in in_sentence):
        return None
    inside = float(np.dot(np.asarray(in_sentence[0]), np.asarray(in_sentence[1])))
    outside = float(np.dot(np.asarray(bare[0]), np.asarray(bare[1])))
    return inside, outside


def model_checked(
    verdicts: Sequence[Verdict],
    probes: Sequence[SynonymProbe],
    vectors: Any,
    *,
    verifier: bool,
    context: Sequence[tuple[float, float] | None] | None = None,
    asked: Sequence[float | None] | None = None,
) -> list[Verdict]:
    """Fold the model check in: ``vectors`` holds the unit embeddings of each probe's
    ``text`` then ``masked``, in probe order. A swap that moves the query less than
    :data:`SYNONYM_MOVE_RATIO` (:data:`LEXICAL_MOVE_RATIO` for a WordNet synonym) of
    what deleting the span moves it is explained (a ``model`` difference, allowed) and
    the candidate is served (or verified); so is a swap of content words that the
    model reads as one sense in context (``context``, per probe, from
    :func:`in_context`: at least :data:`CONTEXT_FLOOR` and above the bare words'
    cosine) moving the query at most :data:`CONTEXT_MOVE_RATIO` of the deletion. Every
    other verdict is returned unchanged. ``asked`` holds, per probe with
    :attr:`SynonymProbe.against`, the cosine of the two questions as asked: the move is
    measured on it instead of the messages' similarity."""
    out = list(verdicts)
    for k, probe in enumerate(probes):
        v = out[probe.index]
        assert v.analysis is not None
        text, masked = vectors[2 * k], vectors[2 * k + 1]
        drop = 1.0 - float(np.dot(np.asarray(text), np.asarray(masked)))
        seen_asked = asked[k] if asked is not None and k < len(asked) else None
        move = 1.0 - (v.score if seen_asked is None else seen_asked)
        ratio = LEXICAL_MOVE_RATIO if probe.lexical else SYNONYM_MOVE_RATIO
        seen = context[k] if context is not None and k < len(context) else None
        if seen is not None and seen[0] >= CONTEXT_FLOOR and seen[0] > seen[1]:
            ratio = max(ratio, CONTEXT_MOVE_RATIO)
        if drop <= 0.0 or move > ratio * drop:
            continue
        if probe.lexical:
            swap = next(d for d in v.analysis.differences if d.kind == "lexical")
            kept = v.analysis.differences
        else:
            swap = v.analysis.refusals[0]
            kept = tuple(d for d in v.analysis.differences if d is not swap)
        note = Difference("model", swap.query, swap.candidate, False)
        analysis = Analysis(
            v.analysis.query,
            v.analysis.candidate,
            (*kept, note),
            False,
            v.analysis.shared,
            v.analysis.synonymous,
        )
        outcome = "verify" if verifier else "serve"
        out[probe.index] = Verdict(v.candidate, outcome, "", v.score, analysis, v.verifier)
    return out


def reread(verdicts: Sequence[Verdict]) -> int | None:
    """The best verdict to embed again as the analysis reads it
    (:attr:`~agent_cache.differences.Analysis.read`: typos and synonyms in the
    candidate's words, acronyms spelled out, fillers and greetings left out): below the
    threshold, nothing refused, and read otherwise than written; ``None`` when a
    candidate is servable already. The embedder then judges what is left of the
    difference, not the spelling ("hey quick question how do i resett my pasword" 0.63,
    read as "how do i reset my password")."""
    if any(v.outcome in ("serve", "verify") for v in verdicts):
        return None
    for i, v in sorted(enumerate(verdicts), key=lambda iv: -iv[1].score):
        a = v.analysis
        if v.outcome == "below_threshold" and a is not None and a.read[0]:
            return i  # a reading exists only when nothing refuses and it differs
    return None


def reread_checked(
    verdicts: Sequence[Verdict],
    index: int,
    vectors: Any,
    policy: SemanticPolicy,
    *,
    verifier: bool,
) -> list[Verdict]:
    """Fold the reading in: ``vectors`` holds the unit embeddings of the verdict's two
    read texts; at or above the threshold the candidate is served (or verified), with a
    ``read`` note of the two texts in its analysis."""
    out = list(verdicts)
    v = out[index]
    a = v.analysis
    assert a is not None
    cos = float(np.dot(np.asarray(vectors[0]), np.asarray(vectors[1])))
    if cos < policy.threshold:
        return out
    note = Difference("read", a.read[0], a.read[1], False)
    analysis = replace(a, differences=(*a.differences, note))
    outcome = "verify" if verifier else "serve"
    out[index] = Verdict(v.candidate, outcome, "", v.score, analysis, v.verifier)
    return out


def screen(
    query: str, candidates: Sequence[Candidate], policy: SemanticPolicy, *, verifier: bool
) -> list[Verdict]:
    """Step 1-2 for every candidate, best similarity first; with ``verifier``, the
    candidates that the verifier must score come back as ``"verify"``."""
    out: list[Verdict] = []
    for cand in sorted(candidates, key=lambda c: -c.similarity):
        if cand.similarity < policy.lowest:
            out.append(Verdict(cand, "below_threshold", score=cand.similarity))
            continue
        analysis = analyze(query, cand.text, case_sensitive=policy.case_sensitive)
        if analysis.refused:
            out.append(Verdict(cand, "refused", analysis.reason, cand.similarity, analysis))
            continue
        by_similarity = (
            cand.similarity >= policy.threshold
            or (analysis.equivalent and cand.similarity >= policy.floor)
            or (analysis.reworded and cand.similarity >= REWORDED_FLOOR)
        )
        if verifier and (by_similarity or policy.combiner is not None):
            out.append(Verdict(cand, "verify", score=cand.similarity, analysis=analysis))
        elif by_similarity:
            out.append(Verdict(cand, "serve", score=cand.similarity, analysis=analysis))
        else:
            out.append(Verdict(cand, "below_threshold", score=cand.similarity, analysis=analysis))
    return out


def finish(
    verdicts: Sequence[Verdict], scores: Sequence[float], policy: SemanticPolicy
) -> list[Verdict]:
    """Step 3: fold the verifier's ``scores`` (one per ``"verify"`` verdict, in order) in.

    Returns every verdict; the servable ones (``"serve"``) are ordered best first.
    """
    pending = [v for v in verdicts if v.outcome == "verify"]
    if len(scores) != len(pending):
        raise ConfigurationError(
            f"the verifier returned {len(scores)} scores for {len(pending)} candidates"
        )
    scored = iter(scores)
    out: list[Verdict] = []
    for v in verdicts:
        if v.outcome != "verify":
            out.append(v)
            continue
        s = float(next(scored))
        assert v.analysis is not None
        if policy.combiner is not None:
            p = policy.combiner.probability(features(v.candidate.similarity, s, v.analysis))
            ok = p >= policy.combiner.cut
            out.append(
                Verdict(
                    v.candidate,
                    "serve" if ok else "refused",
                    "" if ok else "verifier",
                    p,
                    v.analysis,
                    s,
                )
            )
        else:
            ok = s >= policy.rerank_threshold
            out.append(
                Verdict(
                    v.candidate,
                    "serve" if ok else "refused",
                    "" if ok else "verifier",
                    s,
                    v.analysis,
                    s,
                )
            )
    served = sorted((v for v in out if v.outcome == "serve"), key=lambda v: -v.score)
    return served + [v for v in out if v.outcome != "serve"]


def decide(
    query: str,
    candidates: Sequence[Candidate],
    policy: SemanticPolicy,
    verifier: Any = None,
) -> list[Verdict]:
    """:func:`screen` then the verifier then :func:`finish`, in one call (no I/O besides
    the verifier's ``score``): for calibration and benchmarks."""
    verdicts = screen(query, candidates, policy, verifier=verifier is not None)
    pending = [v.candidate.text for v in verdicts if v.outcome == "verify"]
    scores = list(verifier.score(query, pending)) if pending else []
    return finish(verdicts, scores, policy)
