from __future__ import annotations

import pytest

from agent_cache import ConfigurationError, TtlPolicy, TtlTier
from agent_cache._request import keys_for, prepare
from agent_cache.differences import analyze
from agent_cache.keys import Template, canonical_json, digest, normalize
from agent_cache.policy import is_cacheable


def reason(query: str, candidate: str, *, case_sensitive: bool = False) -> str:
    """The difference analysis's refusal reason ("" when nothing refuses)."""
    return analyze(query, candidate, case_sensitive=case_sensitive).reason


def _req(prompt: str, **kw: object):
    args = dict(
        llm_string="m",
        namespace="default",
        context=None,
        template_version="",
        casefold=True,
        templates=(),
    )
    args.update(kw)
    return prepare(prompt, **args)  # type: ignore[arg-type]


def test_normalize_nfkc_whitespace_and_case() -> None:
    assert normalize("  What\u00a0is   ＲＡＧ?\n") == "what is rag?"
    assert normalize("Foo  Bar", casefold=False) == "Foo Bar"


def test_digest_is_unambiguous_under_concatenation() -> None:
    assert digest("foo", "ab") != digest("fooa", "b")
    assert digest("a", "") != digest("", "a")
    assert digest("1:a,", "") != digest("1:a", ",")


def test_keys_cannot_collide_by_moving_text_between_fields() -> None:
    a = keys_for(_req("b c", namespace="a"), 0)
    b = keys_for(_req("c", namespace="a b"), 0)
    assert a.exact != b.exact
    c = keys_for(_req("x", llm_string="model-1"), 0)
    d = keys_for(_req("x", llm_string="model-"), 0)
    assert c.exact != d.exact


def test_key_changes_with_every_field_that_changes_the_answer() -> None:
    base = keys_for(_req("what is rag"), 0)
    assert keys_for(_req("What   is RAG"), 0).exact == base.exact
    assert keys_for(_req("what is rag"), 1).exact != base.exact  # version bump
    assert keys_for(_req("what is rag", llm_string="other"), 0).exact != base.exact
    assert keys_for(_req("what is rag", template_version="v2"), 0).exact != base.exact
    assert keys_for(_req("what is rag", context="doc 1"), 0).exact != base.exact
    assert keys_for(_req("what is rag", context="doc 1"), 0).entry_scope != base.entry_scope


def test_case_matters_when_casefold_is_off() -> None:
    a = keys_for(_req("print(X)", casefold=False), 0)
    b = keys_for(_req("print(x)", casefold=False), 0)
    assert a.exact != b.exact


def test_canonical_json_ignores_key_order_and_int_floats() -> None:
    assert canonical_json({"b": 1.0, "a": [1, 2.5]}) == canonical_json({"a": [1, 2.5], "b": 1})
    with pytest.raises(ConfigurationError):
        canonical_json({"a": object()})


def test_template_params_form_the_key() -> None:
    t = Template("order", ("status of order {id}", "where is my order {id}"))
    r1 = _req("Status of order 12345?", templates=(t,))
    r2 = _req("where is my order 12345", templates=(t,))
    r3 = _req("status of order 12346", templates=(t,))
    assert r1.template == ("order", '{"id":"12345"}')
    assert keys_for(r1, 0).primary == keys_for(r2, 0).primary
    assert keys_for(r1, 0).primary != keys_for(r3, 0).primary
    with pytest.raises(ConfigurationError):
        Template("bad", ("no placeholder",))


def test_bad_prompts_raise_configuration_error() -> None:
    for bad in (None, b"bytes", 42):
        with pytest.raises(ConfigurationError):
            _req(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="surrogate"):
        _req("bad \ud800 text")
    with pytest.raises(ConfigurationError, match="limit"):
        _req("x" * 2_000_000)
    with pytest.raises(ConfigurationError):
        _req("   ")
    with pytest.raises(ConfigurationError):
        _req("ok", namespace="")


def test_guards_refuse_numbers_and_negation() -> None:
    assert reason("order 12,345", "order 12345") == ""
    assert reason("I can't cancel", "I can cancel") == "negation"
    assert reason("status of order 12345", "status of order 12346") == "numbers"
    assert reason("can i cancel my plan", "can't i cancel my plan") == "negation"
    assert reason("how do i cancel", "how can i cancel") == ""


def test_ttl_policy_tiers_explicit_and_jitter() -> None:
    p = TtlPolicy(
        default_ttl=3600, tiers=(TtlTier("rt", 30, (r"\bweather\b",)),), jitter=0.1, seed=1
    )
    assert p.ttl_for("weather in oslo", None) == (30, "rt")
    assert p.ttl_for("what is rag", None) == (3600, "default")
    assert p.ttl_for("weather in oslo", 5) == (5, "explicit")
    spread = [p.expires_at(0.0, 3600) for _ in range(200)]
    assert all(3240 <= e <= 3960 for e in spread)  # type: ignore[operator]
    assert len(set(spread)) > 100  # jitter actually spreads expiries
    assert p.expires_at(10.0, None) is None
    with pytest.raises(ConfigurationError):
        p.ttl_for("x", -1)
    with pytest.raises(ConfigurationError):
        TtlPolicy(jitter=1.5)


def test_semantic_ttl_caps_the_vector_copy() -> None:
    p = TtlPolicy(default_ttl=3600, semantic_ttl=60, jitter=0)
    assert p.semantic_expires_at(100.0, 3700.0) == 160.0
    assert p.semantic_expires_at(100.0, None) == 160.0


def test_errors_and_empty_answers_are_not_cacheable() -> None:
    for v in (None, "", "  ", {}, [], {"error": "boom"}, {"text": ""}, ValueError("x")):
        assert not is_cacheable(v), v
    for v in ("ok", {"text": "ok"}, [1], 0, False):
        assert is_cacheable(v), v


def test_entity_and_opposite_guards() -> None:
    assert reason("Flights from Boston to Denver", "Flights from Boston to Chicago") == ("entities")
    # entities are matched case-insensitively against the other text's words
    assert reason("best movies in Hollywood", "Best hollywood movies") == ""
    assert reason("How do I cancel an order?", "How do I create an order?") == "opposites"
    assert reason("pros of remote work", "cons of remote work") == "opposites"
    assert reason("how do I sell shares", "how can I sell my shares") == ""
    assert reason("print(X)", "print(x)", case_sensitive=True) == "case"
    assert reason("print(X)", "print(x)") == ""
