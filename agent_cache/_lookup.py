"""Reading the cache: the exact key, the template key, then candidate selection and
verification in the semantic layer.

Cheapest check first: an embedding is never computed for a request the exact layer can
answer. The semantic path fetches the top-k stored questions *within the request's
scope* (filtered before the k-NN, never after), lets :mod:`agent_cache.semantic` screen
them (difference analysis, thresholds), has the verifier score what is left, and serves
the best candidate whose entry is still live. Everything here is a flow
(:mod:`agent_cache._flow`): one body for the sync and async paths.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agent_cache import _io as io
from agent_cache import _request as rq
from agent_cache import embedders, semantic, tracing
from agent_cache._backends import Backends
from agent_cache._flow import Flow
from agent_cache._hits import CacheHit, Outcome, hit_from_record
from agent_cache._respell import respelled
from agent_cache._settings import Settings
from agent_cache._trust import Trust
from agent_cache.differences import Analysis, analyze
from agent_cache.errors import ConfigurationError
from agent_cache.protocols import VectorMatch
from agent_cache.stats import HIT, Count, LookupOutcome, StatsRecorder

__all__ = ["POLICIES", "Reader"]

POLICIES = ("use", "bypass", "no_store", "refresh")

#: Namespaces whose last-read version a reader keeps (then it starts over).
_MAX_VERSIONS = 4096

log = logging.getLogger("agent_cache")


class Reader:
    """The read path of one cache (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        backends: Backends,
        trust: Trust,
        stats: StatsRecorder,
        *,
        rng: random.Random,
        failed: Callable[[Exception, str], None],
        judge: Any = None,
    ) -> None:
        self._s = settings
        self._judge = judge
        self._b = backends
        self._trust = trust
        self._stats = stats
        self._rng = rng
        self._failed = failed
        self._identity: tuple[object, str] | None = None  # (embedder, its identity)
        self._mismatch_warned = False
        self._versions: dict[str, int] = {}  # namespace -> the version read last

    def version_guess(self, namespace: str) -> int:
        """The namespace's version as this cache last read it (0 before any read): what
        a lookup or a store keys on first, checked in the same round trip."""
        return self._versions.get(namespace, 0)

    def saw_version(self, namespace: str, version: int) -> None:
        """Remember ``namespace``'s version as read (a bounded map: cleared when full)."""
        if len(self._versions) >= _MAX_VERSIONS:
            self._versions.clear()
        self._versions[namespace] = version

    def vector_scope(self, keys: rq.Keys, vector: Any) -> str:
        """The scope ``vector`` (made by this cache's embedder) is stored and searched
        under: the entry scope and the embedder's identity and dimension, so a model never
        compares its queries with another model's vectors (filtered inside the k-NN)."""
        embedder = self._b.embedder
        known = self._identity
        if known is None or known[0] is not embedder:
            from agent_cache.embedders import embedder_identity

            known = self._identity = (embedder, embedder_identity(embedder))
        return keys.vector_scope(rq.embedder_tag(known[1], int(np.shape(vector)[-1])))

    def semantic_on(self, req: rq.Request) -> bool:
        """Whether the request may use the semantic layer (and its answer is embedded)."""
        return req.template is None and not req.verbatim and req.namespace not in self._s.exact_only

    def policy(self, namespace: str, threshold: float | None = None) -> semantic.SemanticPolicy:
        return semantic.SemanticPolicy(
            threshold=self._trust.threshold_for(namespace) if threshold is None else threshold,
            rerank_threshold=self._s.rerank_threshold,
            combiner=getattr(self._b.reranker, "combiner", None),
            case_sensitive=namespace in self._s.case_sensitive,
        )

    # ------------------------------------------------------------------ one lookup
    def read_flow(self, req: rq.Request, policy: str, llm_string: str) -> Flow[CacheHit | None]:
        """A whole lookup: the policy and the control group, the layers, the stats; a
        failing store is a logged miss."""
        if not self._begin(policy, req.namespace):
            return None
        started = time.perf_counter()
        with tracing.span("lookup", namespace=req.namespace):
            try:
                outcome = yield from self.layers_flow(req, self._s.clock())
            except Exception as exc:  # ours (BackendError) or a backend's own exception type
                self._failed(exc, "lookup")
                outcome = Outcome(None, "", error=True)
            return self._finish(outcome, started, req.namespace, llm_string)

    def _begin(self, policy: str, namespace: str) -> bool:
        """Count a lookup that skips the cache; False when it must not read it at all."""
        if policy not in POLICIES:
            raise ConfigurationError(f"policy must be one of {POLICIES}, not {policy!r}")
        if policy in ("bypass", "refresh"):
            self._stats.request(namespace, "none", LookupOutcome.BYPASS, 0.0)
            return False
        if self._s.bypass_rate and self._rng.random() < self._s.bypass_rate:
            self._stats.request(namespace, "none", LookupOutcome.CONTROL, 0.0)
            return False
        return True

    def _finish(
        self, outcome: Outcome, started: float, namespace: str, llm_string: str
    ) -> CacheHit | None:
        hit, label = self._trust.review(outcome, namespace)
        elapsed = time.perf_counter() - started
        if hit is None:
            missed = label in (LookupOutcome.MISS, LookupOutcome.ERROR)
            layer = "none" if missed else "semantic"
            self._stats.request(namespace, layer, label, elapsed)
        else:
            layer, label = hit.layer, LookupOutcome.HIT
            self._stats.request(namespace, layer, label, elapsed)
            self._stats.saved(namespace, llm_string, hit.usage, rq.estimate_tokens(hit.response))
        tracing.annotate(None, layer=layer, outcome=str(label), score=hit.score if hit else None)
        return hit

    def layers_flow(self, req: rq.Request, now: float) -> Flow[Outcome]:
        """Exact (or template) key first, then the semantic layer."""
        with tracing.span("exact", namespace=req.namespace) as sp:
            keys, raw = yield from self._exact_flow(req, now)
            tracing.annotate(sp, outcome="miss" if raw is None else HIT)
        if raw is not None:
            layer = "template" if keys.template else "exact"
            record = yield from self._verified_flow(
                raw, keys.primary, None if keys.template else req, req.namespace
            )
            if record is not None:
                hit = hit_from_record(record, layer, None, keys.primary, req.namespace)
                return Outcome(hit, keys.exact)
        if not self.semantic_on(req):
            return Outcome(None, keys.exact)
        with tracing.span("semantic", namespace=req.namespace) as sp:
            outcome = yield from self._semantic_flow(req, keys, now)
            tracing.annotate(
                sp,
                outcome=HIT if outcome.hit else outcome.refused or "miss",
                score=outcome.hit.score if outcome.hit else None,
            )
        return outcome

    def _exact_flow(self, req: rq.Request, now: float) -> Flow[tuple[rq.Keys, str | None]]:
        """The namespace's version and the exact key's value at it: one round trip when
        the version is the one this reader saw last (a bump since: a second read)."""
        guess = self.version_guess(req.namespace)
        guessed = rq.keys_for(req, guess)
        counter = rq.version_counter(req.namespace)
        version, raw = yield from io.kv_get_guessed(
            self._b.kv, counter, guess, guessed.primary, now
        )
        if version != guess:
            self.saw_version(req.namespace, version)
            keys = rq.keys_for(req, version)
            raw = yield from io.kv_get(self._b.kv, keys.primary, now)
            return keys, raw
        return guessed, raw

    # ------------------------------------------------------------------ semantic layer
    def _semantic_flow(self, req: rq.Request, keys: rq.Keys, now: float) -> Flow[Outcome]:
        matches = yield from self._search_flow(req, keys, now)
        verdicts = yield from self.verdicts_flow(req, matches)
        refused = None
        for v in verdicts:
            if v.outcome == "refused":
                self._stats.incr(Count.REFUSED_PREFIX + v.reason, namespace=req.namespace)
                refused = refused or f"{LookupOutcome.REFUSED}_{v.reason}"
        for v in verdicts:
            if v.outcome != "serve":
                break  # servable verdicts come first
            raw = yield from io.kv_get(self._b.kv, v.candidate.key, now)
            if raw is None:  # expired, evicted or invalidated: drop the stale vector
                yield from io.vector_delete(self._b.vectors, [v.candidate.id])
                continue
            record = yield from self._verified_flow(raw, v.candidate.key, None, req.namespace)
            if record is None:
                continue
            hit = hit_from_record(
                record,
                "semantic",
                v.score,
                v.candidate.key,
                req.namespace,
                similarity=v.candidate.similarity,
            )
            return Outcome(hit, keys.exact, query=req.prompt)
        explore = yield from self._trust.explore_flow(req, verdicts, now)
        return Outcome(None, keys.exact, query=req.prompt, explore=explore, refused=refused)

    def _search_flow(self, req: rq.Request, keys: rq.Keys, now: float) -> Flow[list[VectorMatch]]:
        """The k nearest stored questions; for a question with misspelled words, also
        those of its respelling (:mod:`agent_cache._respell`: "cancle my subscrption"
        finds "cancel my subscription"), each at its better similarity. Only the search
        reads the respelling: the analysis judges the question as written. A question
        typed with no question mark or with several ("Can dogs eat grapes", "... ???")
        is searched for as asked with one (:func:`agent_cache._request.embedded_text`,
        as it is stored): the embedder reads the marks."""
        asked = rq.embedded_text(req.prompt)
        fixed = respelled(asked)
        texts = [asked] if fixed is None else [asked, fixed]
        vectors = yield from io.embed(self._b.embedder, texts)
        scope = self.vector_scope(keys, vectors[0])
        k = self._top_k(req.prompt)
        found: dict[str, VectorMatch] = {}
        for vector in vectors:
            for m in (
                yield from io.vector_query(self._b.vectors, vector, k=k, scope=scope, now=now)
            ):
                if m.id not in found or m.score > found[m.id].score:
                    found[m.id] = m
        return sorted(found.values(), key=lambda m: -m.score)

    def _verified_flow(
        self, raw: str, key: str, req: rq.Request | None, namespace: str
    ) -> Flow[rq.Record | None]:
        """The decoded record read under ``key``, or ``None`` when it is not the one
        written there (:meth:`agent_cache._request.Record.mismatch`: a restored or
        mixed-up database): never served, counted (``record_mismatch``), evicted with
        its vector; warned once per cache, at debug level after."""
        record = rq.Record.decode(raw, key)
        why = record.mismatch(key, req)
        if why is None:
            return record
        self._stats.incr(Count.RECORD_MISMATCH, namespace=namespace)
        first, self._mismatch_warned = not self._mismatch_warned, True
        (log.warning if first else log.debug)(
            "agent-cache: the record under %s is not the one written there (its %s "
            "differs: a restored or mixed-up store?); evicted, served as a miss",
            key,
            why,
        )
        yield from io.vector_delete(self._b.vectors, [key])
        yield from io.kv_delete(self._b.kv, [key])
        return None

    def verdicts_flow(
        self, req: rq.Request, matches: Sequence[VectorMatch]
    ) -> Flow[list[semantic.Verdict]]:
        """The semantic decision (:mod:`agent_cache.semantic`) over the k-NN candidates:
        screen, have the verifier score what is left, decide."""
        threshold = yield from io.call(self._trust.threshold_for, req.namespace)
        policy = self.policy(req.namespace, threshold)
        candidates = [
            semantic.Candidate(
                m.id, str(m.metadata.get("key", m.id)), str(m.metadata.get("text", "")), m.score
            )
            for m in matches
        ]
        reranker = self._b.reranker
        asked = rq.embedded_text(req.prompt)  # judged as embedded
        verdicts = yield from self._screen_flow(asked, candidates, policy, reranker)
        pending = [v.candidate.text for v in verdicts if v.outcome == "verify"]
        scores: list[float] = []
        if pending and reranker is not None:
            with tracing.span("verify", namespace=req.namespace, candidates=len(pending)) as sp:
                scores = list((yield from io.rerank(reranker, asked, pending)))
                tracing.annotate(sp, score=max(scores, default=None))
        return semantic.finish(verdicts, scores, policy)

    def _top_k(self, prompt: str) -> int:
        """Candidates to fetch: a long prompt (a document + a question) has many neighbours
        of near-equal cosine (every question about the same document), so 4x more are
        judged on their differing spans."""
        k = self._s.top_k
        return k * 4 if len(prompt) > semantic.EMBEDDER_WINDOW_CHARS else k

    def _screen_flow(
        self,
        query: str,
        candidates: Sequence[semantic.Candidate],
        policy: semantic.SemanticPolicy,
        reranker: object,
    ) -> Flow[list[semantic.Verdict]]:
        """:func:`semantic.screen`, with long pairs judged on what differs: a candidate
        sharing a document (or a preamble) with the query is judged on the two differing
        spans, embedded on their own, and one the embedder cannot have read all of is
        refused (:func:`semantic.focus`)."""
        plain: list[semantic.Candidate] = []
        focused: list[tuple[semantic.Candidate, semantic.Focus]] = []
        out: list[semantic.Verdict] = []
        for cand in candidates:
            f = semantic.focus(query, cand.text) if cand.similarity >= policy.lowest else None
            if f is None:
                plain.append(cand)
            elif f.reason:
                out.append(semantic.Verdict(cand, "refused", f.reason, cand.similarity))
            else:
                focused.append((cand, f))
        verify = reranker is not None
        out.extend(semantic.screen(query, plain, policy, verifier=verify))
        if focused:
            texts = sorted({t for _, f in focused for t in (f.query, f.candidate)})
            rows = yield from io.embed(self._b.embedder, texts)
            at = {t: rows[i] for i, t in enumerate(texts)}
            for cand, f in focused:
                cos = float(min(1.0, max(0.0, float(np.dot(at[f.query], at[f.candidate])))))
                span = semantic.Candidate(cand.id, cand.key, f.candidate, cos)
                for v in semantic.screen(f.query, [span], policy, verifier=verify):
                    out.append(semantic.Verdict(cand, v.outcome, v.reason, v.score, v.analysis))
        # a swapped word the model may explain
        probes = semantic.synonym_probes(out, semantic.synonym_floor(policy.threshold))
        if probes:
            texts = [t for p in probes for t in (p.text, p.masked)]
            bare = [w for p in probes for w in p.bare_words()]
            against = [p.against for p in probes if p.against]  # the questions as asked
            rows = yield from io.embed(self._b.embedder, texts + bare + against)
            n = len(texts) + len(bare)
            context = yield from self._in_context(probes, rows[len(texts) : n])
            more = iter(rows[n:])
            asked = [
                float(np.dot(rows[2 * k], next(more))) if p.against else None
                for k, p in enumerate(probes)
            ]
            out = semantic.model_checked(
                out, probes, rows[: len(texts)], verifier=verify, context=context, asked=asked
            )
        best = semantic.reread(out)  # the pair as the analysis reads it
        if best is not None:
            analysis = out[best].analysis
            assert analysis is not None
            rows = yield from io.embed(self._b.embedder, list(analysis.read))
            out = semantic.reread_checked(out, best, rows, policy, verifier=verify)
        out = _respelled_checked(query, out, policy)
        if self._judge is not None:
            out = yield from self._judged_flow(query, out, policy)
        return out

    def _in_context(
        self, probes: list[semantic.SynonymProbe], bare: Any
    ) -> Flow[list[tuple[float, float] | None]]:
        """Per probe, the swapped spans' cosine in their sentences and bare
        (:func:`semantic.in_context`); ``None`` where the embedder has no token states or
        the swap is not of content words."""
        encode = embedders.span_encoder(self._b.embedder)
        per_probe = [p.context_items() for p in probes]
        items = [it for its in per_probe for it in its]
        if encode is None or not items:
            return [None] * len(probes)
        spans = yield from io.call(encode, items)
        out: list[tuple[float, float] | None] = []
        i = 0
        for its in per_probe:
            n = len(its)
            out.append(semantic.in_context(spans[i : i + n], bare[i : i + n]) if n else None)
            i += n
        return out

    def _judged_flow(
        self, query: str, verdicts: list[semantic.Verdict], policy: semantic.SemanticPolicy
    ) -> Flow[list[semantic.Verdict]]:
        """Ask the request judge about the best close candidate when nothing is servable:
        a cosine within the judge's band below the threshold, or refused only for an
        unexplained substitution. Any other refusal is never overridden."""
        judge = self._judge
        judge.consider()
        if len(query) > semantic.EMBEDDER_WINDOW_CHARS:  # long turns: judged on their spans
            return verdicts
        if any(v.outcome in ("serve", "verify") for v in verdicts):
            return verdicts
        low = policy.threshold - judge.band
        unsure = [
            v
            for v in verdicts
            if v.score >= low
            and (
                v.outcome == "below_threshold"
                or (v.outcome == "refused" and v.reason == "substitution")
            )
        ]
        if not unsure:
            return verdicts
        best = max(unsure, key=lambda v: v.score)
        yes = yield from io.judge_ask(judge, query, best.candidate.text)
        self._stats.incr(Count.JUDGE_SERVED if yes else Count.JUDGE_REFUSED)
        if not yes:
            return verdicts
        served = semantic.Verdict(
            best.candidate, "serve", "", best.score, best.analysis, best.verifier
        )
        return [served] + [v for v in verdicts if v is not best]

    def explain_flow(self, req: rq.Request, candidate: str | None) -> Flow[list[semantic.Verdict]]:
        """The verdicts on ``candidate``, or on the top-k in scope (no stats)."""
        if candidate is not None:
            asked = rq.embedded_text(req.prompt)
            fixed = respelled(asked)
            texts = [rq.embedded_text(candidate), asked] + ([] if fixed is None else [fixed])
            vectors = yield from io.embed(self._b.embedder, texts)
            best = max(float(np.dot(v, vectors[0])) for v in vectors[1:])
            cos = float(min(1.0, max(0.0, best)))
            matches = [VectorMatch("candidate", cos, {"key": "", "text": candidate})]
        else:
            version = yield from io.kv_get_counter(self._b.kv, rq.version_counter(req.namespace))
            keys = rq.keys_for(req, version)
            matches = yield from self._search_flow(req, keys, self._s.clock())
        return (yield from self.verdicts_flow(req, matches))

    # ------------------------------------------------------------------ no stats
    def peek(self, req: rq.Request) -> CacheHit | None:
        """The exact/template record another process may just have written (no stats)."""
        try:
            version = self._b.kv.get_counter(rq.version_counter(req.namespace))
            key = rq.keys_for(req, version).primary
            raw = self._b.kv.get(key, self._s.clock())
            if raw is None:
                return None
            record = rq.Record.decode(raw, key)
        except Exception as exc:
            self._failed(exc, "lookup")
            return None
        if record.mismatch(key, None if req.template else req) is not None:
            self._stats.incr(Count.RECORD_MISMATCH, namespace=req.namespace)
            return None  # the lookup that follows evicts it
        return hit_from_record(record, "exact", None, key, req.namespace)


def _respelled_checked(
    query: str, verdicts: list[semantic.Verdict], policy: semantic.SemanticPolicy
) -> list[semantic.Verdict]:
    """A servable candidate is judged once more against the query respelled
    (:mod:`agent_cache._respell`): a misspelled word the analysis read as noise may be
    the one that matters ("Can I withdraw *ater* the deadline?" means *after*, not the
    stored "before"; "*withotu* a reservation" means *without*). Respelled toward the
    candidate's own words first (a word of it one edit away); refused if that reading
    refuses."""
    if respelled(query) is None:
        return verdicts
    case = policy.case_sensitive
    out = list(verdicts)
    for i, v in enumerate(out):
        if v.outcome not in ("serve", "verify"):
            continue
        fixed = respelled(query, near=v.candidate.text)
        if fixed is None:
            continue  # nothing respelled toward this candidate
        written = analyze(query, v.candidate.text, case_sensitive=case)
        again = analyze(fixed, v.candidate.text, case_sensitive=case)
        # a refusal as written that the model check explained: the swap was measured on
        # the misspelled text against the respelled cosine, so not trusted; a refusal the
        # respelling brings (one the written text did not have) is new
        checked = v.analysis is not None and any(d.kind == "model" for d in v.analysis.differences)
        if checked and written.refuses:
            out[i] = semantic.Verdict(v.candidate, "refused", written.reason, v.score, written)
        elif again.refuses and _refusals(again) != _refusals(written):
            out[i] = semantic.Verdict(v.candidate, "refused", again.reason, v.score, again)
    return out


def _refusals(analysis: Analysis) -> set[tuple[str, str]]:
    return {(d.kind, d.candidate) for d in analysis.refusals}
