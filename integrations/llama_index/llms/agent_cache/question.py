"""Recover the user's question from a prompt that LlamaIndex rendered from a template.

The semantic layer embeds the question alone; everything else in the prompt (system
prompt, the template, retrieved context, earlier turns, tool results) is scope: an exact
filter applied before the k-NN (``docs/architecture.md``, Keys and scope). The question
is found in three ways, the first that works wins:

1. **Template arguments.** Query engines, chat engines and response synthesizers call
   ``llm.predict/apredict/stream/astream(template, query_str=..., context_str=...)``;
   :class:`~llama_index.llms.agent_cache.CachedLLM` records those arguments, and the first
   of ``question_vars`` that is present (``query_str``, ``question``, ``query``) is the
   question.
2. **Rendered text.** The last user message (chat) or the prompt (completion) is matched
   against known templates: LlamaIndex's default text-QA, refine and tree-summarize
   templates (completion and chat variants) and the condense-question templates of the
   chat engines, plus any you register with ``templates=``. The text captured by the
   question variable is the question.
3. **Fallback.** The whole last user message (or prompt) is the question.

The scope (:attr:`Scope.context`) is every message, with the question's occurrence in the
last user message replaced by a placeholder. For a RAG prompt it therefore holds the
template and the retrieved context, so a paraphrase is served only when the same context
was retrieved (put a :class:`~llama_index.postprocessor.agent_cache.StablePrefixPostprocessor`
in the query engine so that the same set of nodes always renders the same context).
"""

from __future__ import annotations

import importlib
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)

from agent_cache import ConfigurationError
from agent_cache.keys import digest

__all__ = ["DEFAULT_QUESTION_VARS", "QUESTION_PLACEHOLDER", "QuestionExtractor", "Scope"]

#: Template variables that hold the user's question, in order of preference.
DEFAULT_QUESTION_VARS: tuple[str, ...] = ("query_str", "question", "query")
#: What replaces the question inside :attr:`Scope.context`.
QUESTION_PLACEHOLDER = "\u241equestion\u241e"

# (module, attribute names): LlamaIndex templates recognized by default.
_DEFAULT_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "llama_index.core.prompts.default_prompts",
        (
            "DEFAULT_TEXT_QA_PROMPT_TMPL",
            "DEFAULT_REFINE_PROMPT_TMPL",
            "DEFAULT_TREE_SUMMARIZE_TMPL",
        ),
    ),
    (
        "llama_index.core.prompts.chat_prompts",
        ("CHAT_TEXT_QA_PROMPT", "CHAT_REFINE_PROMPT", "CHAT_TREE_SUMMARIZE_PROMPT"),
    ),
    ("llama_index.core.chat_engine.condense_question", ("DEFAULT_TEMPLATE",)),
    ("llama_index.core.chat_engine.condense_plus_context", ("DEFAULT_CONDENSE_PROMPT_TEMPLATE",)),
)


class Uncacheable(ConfigurationError):
    """A request with no text to key on (e.g. images only): it bypasses the cache."""


@dataclass(frozen=True)
class Scope:
    """What a request is looked up by.

    Attributes:
        question: the text the semantic layer embeds.
        context: everything else that changes the answer (JSON), ``None`` when the
            request is the question alone.
    """

    question: str
    context: list[dict[str, Any]] | dict[str, Any] | None


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    group: str
    literals: tuple[str, ...]

    def search(self, text: str) -> str | None:
        start = 0
        for literal in self.literals:  # cheap pre-check: every literal, in order
            start = text.find(literal, start)
            if start < 0:
                return None
            start += len(literal)
        match = self.regex.search(text)
        if match is None:
            return None
        question = match.group(self.group).strip()
        return question or None


def _compile(template: str, question_vars: Sequence[str]) -> _Pattern | None:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        return None
    parts: list[str] = []
    literals: list[str] = []
    groups: dict[str, str] = {}
    question_group: str | None = None
    for literal, field, _spec, _conversion in parsed:
        if literal:
            parts.append(re.escape(literal))
            literals.append(literal)
        if field is None:
            continue
        if field in groups:
            parts.append(f"(?P={groups[field]})")
            continue
        name = groups[field] = f"v{len(groups)}"
        if question_group is None and field in question_vars:
            question_group = name
            parts.append(f"(?P<{name}>.+?)")
        else:
            parts.append(f"(?P<{name}>.*?)")
    if question_group is None or not literals:
        return None
    if parsed and parsed[-1][1] is not None:  # ends with a variable: it runs to the end
        parts.append(r"\s*\Z")
    regex = re.compile("".join(parts), re.DOTALL)
    return _Pattern(regex, question_group, tuple(literals))


def _template_strings(obj: Any) -> list[str]:
    """The format strings inside a prompt template (or a plain string)."""
    if isinstance(obj, str):
        return [obj]
    out: list[str] = []
    template = getattr(obj, "template", None)
    if isinstance(template, str) and not hasattr(obj, "template_str"):  # not Jinja
        out.append(template)
    for message in getattr(obj, "message_templates", None) or ():
        content = getattr(message, "content", None)
        if isinstance(content, str):
            out.append(content)
    default = getattr(obj, "default_template", None)
    if default is not None and default is not obj:
        out.extend(_template_strings(default))
    for _condition, prompt in getattr(obj, "conditionals", None) or ():
        out.extend(_template_strings(prompt))
    return out


def _default_templates() -> list[Any]:
    found: list[Any] = []
    for module_name, names in _DEFAULT_TEMPLATES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # pragma: no cover - depends on the llama-index-core version
            continue
        found.extend(getattr(module, name) for name in names if hasattr(module, name))
    return found


def message_text(message: ChatMessage) -> str:
    """The concatenated text blocks of a message."""
    return "\n".join(b.text for b in message.blocks if isinstance(b, TextBlock))


def _tool_args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _tool_calls(message: ChatMessage) -> list[dict[str, Any]]:
    calls = [
        {"name": b.tool_name, "args": _tool_args(b.tool_kwargs)}
        for b in message.blocks
        if isinstance(b, ToolCallBlock)
    ]
    if calls:
        return calls
    for call in message.additional_kwargs.get("tool_calls") or ():  # older integrations
        function = (
            call.get("function") if isinstance(call, Mapping) else getattr(call, "function", None)
        )
        if isinstance(function, Mapping):
            name, args = function.get("name"), function.get("arguments")
        else:
            name, args = getattr(function, "name", None), getattr(function, "arguments", None)
        calls.append({"name": str(name), "args": _tool_args(args)})
    return calls


def describe_message(message: ChatMessage, text: str | None = None) -> dict[str, Any]:
    """A JSON description of a message for the scope: role, text, tool calls, other blocks.

    Provider-generated ids (tool call ids) are left out: they differ on every run and do
    not change the answer.
    """
    role = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    out: dict[str, Any] = {"role": role, "text": message_text(message) if text is None else text}
    calls = _tool_calls(message)
    if calls:
        out["tool_calls"] = calls
    others = [
        {
            "type": str(getattr(b, "block_type", type(b).__name__)),
            "digest": digest(b.model_dump_json()),
        }
        for b in message.blocks
        if not isinstance(b, TextBlock | ToolCallBlock)
    ]
    if others:
        out["blocks"] = others
    name = message.additional_kwargs.get("name") or message.additional_kwargs.get("tool_name")
    if isinstance(name, str):
        out["name"] = name
    return out


def _mask(text: str, question: str) -> str | None:
    pos = text.rfind(question)
    if pos < 0:
        return None
    return text[:pos] + QUESTION_PLACEHOLDER + text[pos + len(question) :]


class QuestionExtractor:
    """Finds the question in LlamaIndex prompts (see the module docstring for how).

    Args:
        templates: more templates to recognize: format strings (``"...{query_str}..."``),
            ``PromptTemplate`` or ``ChatPromptTemplate`` objects. Checked before the
            defaults.
        question_vars: template variables that hold the question, in order of preference.
        include_defaults: also recognize LlamaIndex's default QA / refine / summarize /
            condense templates.

    Example:
        >>> ex = QuestionExtractor(templates=["Docs:\\n{context_str}\\nQ: {query_str}\\nA:"])
        >>> ex.scope_prompt("Docs:\\nRAG is ...\\nQ: What is RAG?\\nA:").question
        'What is RAG?'
    """

    def __init__(
        self,
        templates: Iterable[Any] = (),
        *,
        question_vars: Sequence[str] = DEFAULT_QUESTION_VARS,
        include_defaults: bool = True,
    ) -> None:
        self.question_vars = tuple(question_vars)
        sources = [*templates, *(_default_templates() if include_defaults else ())]
        patterns: list[_Pattern] = []
        seen: set[str] = set()
        for source in sources:
            for text in _template_strings(source):
                if text in seen:
                    continue
                seen.add(text)
                pattern = _compile(text, self.question_vars)
                if pattern is not None:
                    patterns.append(pattern)
        self._patterns = tuple(patterns)

    def question_from_args(self, args: Mapping[str, Any]) -> str | None:
        """The question among a template's arguments (the first of ``question_vars``)."""
        for var in self.question_vars:
            value = args.get(var)
            if isinstance(value, str) and value.strip():
                return value
        return None

    def question_from_text(self, text: str) -> str | None:
        """The question inside a rendered template, or ``None`` when none matches."""
        for pattern in self._patterns:
            question = pattern.search(text)
            if question is not None:
                return question
        return None

    def _split(self, text: str, hint: str | None) -> tuple[str, str]:
        for candidate in (hint, self.question_from_text(text)):
            if candidate:
                masked = _mask(text, candidate) or _mask(text, candidate.strip())
                if masked is not None:
                    return candidate.strip(), masked
        question = text.strip()
        if not question:
            raise Uncacheable("no text to key on")
        return question, QUESTION_PLACEHOLDER

    def scope_prompt(self, prompt: str, hint: str | None = None) -> Scope:
        """Scope of a completion prompt.

        Raises:
            Uncacheable: the prompt is empty.
        """
        question, masked = self._split(prompt, hint)
        return Scope(question, None if masked == QUESTION_PLACEHOLDER else {"prompt": masked})

    def scope_messages(self, messages: Sequence[ChatMessage], hint: str | None = None) -> Scope:
        """Scope of a chat: the question from the last user turn, the rest as context.

        Raises:
            Uncacheable: there is no text to key on.
        """
        if not messages:
            raise Uncacheable("no messages")
        index = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == MessageRole.USER),
            len(messages) - 1,
        )
        question, masked = self._split(message_text(messages[index]), hint)
        context = [
            describe_message(m, masked if i == index else None) for i, m in enumerate(messages)
        ]
        if len(context) == 1 and context[0] == {"role": "user", "text": QUESTION_PLACEHOLDER}:
            return Scope(question, None)
        return Scope(question, context)
