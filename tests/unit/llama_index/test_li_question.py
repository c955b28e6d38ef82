"""QuestionExtractor: the question out of LlamaIndex's rendered prompts, the rest as scope."""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.chat_engine.condense_question import DEFAULT_PROMPT
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.chat_prompts import CHAT_REFINE_PROMPT, CHAT_TEXT_QA_PROMPT
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.llms.agent_cache import QuestionExtractor
from llama_index.llms.agent_cache.question import QUESTION_PLACEHOLDER, Uncacheable

CONTEXT = "Refunds take 5 days.\n---------------------\nTricky: Query: not this"


@pytest.fixture(scope="module")
def ex() -> QuestionExtractor:
    return QuestionExtractor()


def test_chat_text_qa_template(ex: QuestionExtractor) -> None:
    messages = CHAT_TEXT_QA_PROMPT.format_messages(
        context_str=CONTEXT, query_str="How long do refunds take?"
    )
    scope = ex.scope_messages(messages)
    assert scope.question == "How long do refunds take?"
    assert isinstance(scope.context, list) and len(scope.context) == 2
    user = scope.context[-1]["text"]
    assert CONTEXT in user and QUESTION_PLACEHOLDER in user and "How long" not in user


def test_completion_template_and_refine_template(ex: QuestionExtractor) -> None:
    prompt = DEFAULT_TEXT_QA_PROMPT.format(context_str=CONTEXT, query_str="Who ships?")
    assert ex.scope_prompt(prompt).question == "Who ships?"
    refine = CHAT_REFINE_PROMPT.format_messages(
        context_msg="More text.", query_str="Who ships?", existing_answer="DHL."
    )
    assert ex.scope_messages(refine).question == "Who ships?"


def test_condense_question_template_uses_question_var(ex: QuestionExtractor) -> None:
    prompt = DEFAULT_PROMPT.format(
        chat_history="user: hi\nassistant: hello", question="and refunds?"
    )
    scope = ex.scope_prompt(prompt)
    assert scope.question == "and refunds?"
    assert "user: hi" in scope.context["prompt"]  # type: ignore[index]


def test_paraphrases_share_the_context(ex: QuestionExtractor) -> None:
    def scope(q: str) -> object:
        return ex.scope_messages(
            CHAT_TEXT_QA_PROMPT.format_messages(context_str=CONTEXT, query_str=q)
        )

    a, b = scope("How long do refunds take?"), scope("What is the refund delay?")
    assert a.context == b.context and a.question != b.question  # type: ignore[attr-defined]
    other = ex.scope_messages(
        CHAT_TEXT_QA_PROMPT.format_messages(
            context_str="Other docs.", query_str="How long do refunds take?"
        )
    )
    assert other.context != a.context  # type: ignore[attr-defined]


def test_custom_template_and_hint(ex: QuestionExtractor) -> None:
    tmpl = "Docs:\n{context_str}\nQ: {query_str}\nA:"
    text = PromptTemplate(tmpl).format(context_str="x", query_str="What is RAG?")
    assert ex.scope_prompt(text).question == text  # unknown template: the whole prompt
    custom = QuestionExtractor(templates=[PromptTemplate(tmpl)])
    assert custom.scope_prompt(text).question == "What is RAG?"
    assert ex.scope_prompt(text, hint="What is RAG?").question == "What is RAG?"
    assert ex.scope_prompt(text, hint="not in the prompt").question == text


def test_question_vars_are_configurable() -> None:
    ex = QuestionExtractor(question_vars=("ask",), include_defaults=False)
    assert ex.question_from_args({"query_str": "a", "ask": "b"}) == "b"
    assert ex.question_from_args({"query_str": "a"}) is None


def test_plain_chat_question_is_the_last_user_turn(ex: QuestionExtractor) -> None:
    single = ex.scope_messages([ChatMessage(role="user", content="What is RAG?")])
    assert single.question == "What is RAG?" and single.context is None
    history = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What is RAG?"),
        ChatMessage(role="assistant", content="Retrieval-augmented generation."),
        ChatMessage(role="user", content="And HNSW?"),
    ]
    scope = ex.scope_messages(history)
    assert scope.question == "And HNSW?"
    assert [m["role"] for m in scope.context] == ["system", "user", "assistant", "user"]  # type: ignore[union-attr]


def test_tool_call_ids_are_not_scope_but_arguments_are(ex: QuestionExtractor) -> None:
    def turn(call_id: str, args: str) -> list[ChatMessage]:
        return [
            ChatMessage(role="user", content="Weather?"),
            ChatMessage(
                role="assistant",
                blocks=[ToolCallBlock(tool_call_id=call_id, tool_name="w", tool_kwargs=args)],
            ),
            ChatMessage(role="tool", content="sunny", additional_kwargs={"tool_call_id": call_id}),
        ]

    a = ex.scope_messages(turn("call_1", '{"city": "Oslo"}'))
    b = ex.scope_messages(turn("call_2", '{ "city":"Oslo" }'))
    c = ex.scope_messages(turn("call_3", '{"city": "Rome"}'))
    assert a.context == b.context != c.context


def test_nothing_to_key_on(ex: QuestionExtractor) -> None:
    with pytest.raises(Uncacheable):
        ex.scope_messages([])
    with pytest.raises(Uncacheable):
        ex.scope_prompt("   ")
