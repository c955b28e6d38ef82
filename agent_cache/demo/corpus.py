"""The demo's bundled data: a tiny help-center corpus about a fictional product, a keyword
retriever, two deterministic "tools", and the two workloads (original questions and the
paraphrases asked on the second pass).

Everything here is made up for the demo ("Acme Cloud" is not a real product).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AGENT_TASKS",
    "DOCS",
    "RAG_QUESTIONS",
    "TEMPLATES",
    "TOOLS",
    "TOOL_DELAY_S",
    "AgentTask",
    "Doc",
    "RagQuestion",
    "invoice_total",
    "order_status",
    "retrieve",
    "route_tool",
]


@dataclass(frozen=True)
class Doc:
    """One help-center article."""

    id: str
    title: str
    text: str


DOCS: tuple[Doc, ...] = (
    Doc("billing-cycle", "Billing cycle",
        "Acme Cloud bills every month on the day of the month you signed up. Invoices are "
        "emailed as PDF files and are listed under Billing > Invoices."),
    Doc("plans-pricing", "Plans and prices",
        "Acme Cloud has three plans: Starter costs $9 per month, Pro costs $29 per month and "
        "Team costs $99 per month. Yearly billing gives two months free."),
    Doc("payment-methods", "Payment methods",
        "Acme Cloud accepts credit cards, debit cards and PayPal. Team plans can also pay by "
        "bank transfer. Payment methods are managed under Billing > Payment methods."),
    Doc("refunds", "Refunds",
        "A refund can be requested within 14 days of a charge from Billing > Invoices > "
        "Request refund. The refund reaches your card in 5 to 10 business days."),
    Doc("cancel-subscription", "Cancel a subscription",
        "To cancel your subscription open Settings > Plan and click Cancel subscription. "
        "You keep access until the end of the period you already paid for."),
    Doc("orders-create", "Create an order",
        "To create an order open Orders > New order, add the items and click Confirm. Each "
        "new order gets a number such as 1001 and a confirmation email."),
    Doc("orders-cancel", "Cancel an order",
        "An order can be cancelled while its status is processing: open Orders, select the "
        "order and click Cancel order. Shipped orders must be returned instead."),
    Doc("shipping", "Shipping",
        "Orders ship within 2 business days. A tracking number is emailed when an order "
        "ships; delivery usually takes 3 to 5 business days."),
    Doc("password-reset", "Reset your password",
        "To reset your password click Forgot password on the sign-in page and follow the "
        "link in the email. The reset link is valid for 30 minutes."),
    Doc("two-factor", "Two-factor authentication",
        "Turn on two-factor authentication under Settings > Security > Enable 2FA and scan "
        "the QR code with an authenticator app. Keep the backup codes safe."),
)  # fmt: skip

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by can do does each for from how i in is it its my of on or "
    "our so such the their then this to up us we what when where which who why will with "
    "you your yet much many long get".split()
)


def _terms(text: str) -> set[str]:
    """Lower-case content words, with a crude plural strip ("orders" -> "order")."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word)
    return out


_DOC_TERMS = {doc.id: _terms(f"{doc.title} {doc.title} {doc.text}") for doc in DOCS}


def retrieve(question: str, k: int = 2) -> list[Doc]:
    """The ``k`` docs sharing the most words with the question, in a stable (id) order.

    Ties are broken by id, and the result is sorted by id rather than by score, so that two
    phrasings retrieving the same docs build the same context (and prompt prefix).

    Example:
        >>> [d.id for d in retrieve("How long does shipping take?")]
        ['shipping']
    """
    words = _terms(question)
    scored = sorted(
        ((len(words & _DOC_TERMS[doc.id]), doc.id) for doc in DOCS),
        key=lambda pair: (-pair[0], pair[1]),
    )
    chosen = {doc_id for score, doc_id in scored[:k] if score > 0}
    return [doc for doc in DOCS if doc.id in chosen] if chosen else []


# -- tools -----------------------------------------------------------------------------

#: Simulated latency of the tools' "backend API" (the tools themselves are local lookups).
TOOL_DELAY_S = 0.1

_ORDERS: dict[int, dict[str, Any]] = {
    1001: {"status": "shipped", "carrier": "UPS", "tracking": "1Z999AA10123456784"},
    1002: {"status": "processing", "carrier": None, "tracking": None},
    1003: {"status": "delivered", "carrier": "DHL", "tracking": "JD014600006281230411"},
    1004: {"status": "cancelled", "carrier": None, "tracking": None},
}
_INVOICES: dict[int, dict[str, Any]] = {
    5001: {"plan": "Pro", "amount_usd": 29.0, "paid": True},
    5002: {"plan": "Team", "amount_usd": 99.0, "paid": False},
}


def order_status(order_id: int) -> dict[str, Any]:
    """Look up an order (deterministic; sleeps ``TOOL_DELAY_S`` like a remote API)."""
    time.sleep(TOOL_DELAY_S)
    found = _ORDERS.get(order_id)
    return {"order_id": order_id, **found} if found else {"order_id": order_id, "error": "unknown"}


def invoice_total(invoice_id: int) -> dict[str, Any]:
    """Look up an invoice (deterministic; sleeps ``TOOL_DELAY_S`` like a remote API)."""
    time.sleep(TOOL_DELAY_S)
    found = _INVOICES.get(invoice_id)
    if not found:
        return {"invoice_id": invoice_id, "error": "unknown"}
    return {"invoice_id": invoice_id, **found}


#: The agent's tools by name.
TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "order_status": order_status,
    "invoice_total": invoice_total,
}
_ROUTES = (
    (re.compile(r"\border\s+#?(\d+)", re.I), "order_status", "order_id"),
    (re.compile(r"\binvoice\s+#?(\d+)", re.I), "invoice_total", "invoice_id"),
)


def route_tool(task: str) -> tuple[str, dict[str, Any]]:
    """The agent's (deterministic) plan: which tool to call with which arguments.

    Example:
        >>> route_tool("Where is my order 1001?")
        ('order_status', {'order_id': 1001})
    """
    for pattern, tool, arg in _ROUTES:
        m = pattern.search(task)
        if m:
            return tool, {arg: int(m.group(1))}
    raise ValueError(f"no tool for task: {task!r}")


# -- workloads -------------------------------------------------------------------------


@dataclass(frozen=True)
class RagQuestion:
    """A question asked on pass 1, and how it is asked again on pass 2.

    ``expect`` is the layer the pass-2 phrasing should be served by, or ``"miss"`` for a
    near-miss that must go to the model.
    """

    question: str
    rephrased: str
    expect: str


@dataclass(frozen=True)
class AgentTask:
    """An agent task on pass 1 and its pass-2 phrasing (``expect`` as in RagQuestion)."""

    task: str
    rephrased: str
    expect: str


RAG_QUESTIONS: tuple[RagQuestion, ...] = (
    RagQuestion("How do I reset my password?", "how do I reset my  PASSWORD?", "exact"),
    RagQuestion("How much does the Pro plan cost?", "What is the price of the Pro plan?",
                "semantic"),
    RagQuestion("How do I cancel my subscription?", "I want to cancel my subscription.",
                "semantic"),
    RagQuestion("How do I request a refund?", "How can I request a refund?", "semantic"),
    RagQuestion("How do I turn on two-factor authentication?",
                "How do I enable two-factor authentication?", "semantic"),
    RagQuestion("Which payment methods do you accept?", "Which payment methods are accepted?",
                "semantic"),
    RagQuestion("How long does shipping take?", "How long will shipping take?", "semantic"),
    RagQuestion("When will I be billed each month?", "When am I billed each month?", "semantic"),
    # a near-miss: cosine ~0.98 with the same documents, but the opposite question
    RagQuestion("Can I cancel an order that has shipped?",
                "Can I cancel an order that has not shipped?", "miss"),
)  # fmt: skip

#: Parameterized prompts (``LayeredCache(templates=...)``): two phrasings of one template
#: with the same parameters share an answer; another parameter never does.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "order_status": (
        "what is the status of order {id}",
        "what's the status of order {id}",
        "where is my order {id}",
        "where is order {id}",
    ),
    "invoice_total": (
        "how much is invoice {id}",
        "what is the total of invoice {id}",
        "what do i owe on invoice {id}",
    ),
}

AGENT_TASKS: tuple[AgentTask, ...] = (
    AgentTask("What is the status of order 1001?", "Where is my order 1001?", "template"),
    AgentTask("Has order 1002 shipped yet?", "Has order 1002 been shipped yet?", "semantic"),
    AgentTask("How much is invoice 5001?", "What is the total of invoice 5001?", "template"),
    # the near-miss: same wording, another order; neither the tool nor the answer may hit
    AgentTask("What is the tracking number for order 1003?",
              "What is the tracking number for order 1004?", "miss"),
)  # fmt: skip
