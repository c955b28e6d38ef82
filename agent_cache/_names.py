"""Keyword arguments the adapters do not take, refused with the names they meant.

Users bring the names of the caches they know: LangChain's ``embeddings=``, LlamaIndex's
``embed_model=``, langchain-redis's ``distance_threshold=``. An adapter refuses what it
does not take, naming itself (not ``LayeredCache.__init__``) and, for each unknown name,
either the agent-cache name of that idea (with the conversion when the scale differs) or
the closest valid names (:func:`difflib.get_close_matches`).

Example:
    >>> reject_unknown("AgentCache", ["distance_threshold"], ["threshold", "path"])
    Traceback (most recent call last):
    ...
    agent_cache.errors.ConfigurationError: AgentCache() does not take distance_threshold=: \
it is threshold= here, a cosine similarity, where langchain-redis's distance_threshold is a \
cosine distance: threshold = 1 - distance_threshold (distance_threshold=0.2 is threshold=0.8)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from agent_cache.errors import ConfigurationError

__all__ = ["FOREIGN_NAMES", "reject_unknown"]

_SIMILARITY = "threshold= is a cosine similarity (higher: stricter, 1.0 only identical questions)"
#: Other libraries' names for an agent-cache argument: ``{name: (ours, how they differ)}``.
FOREIGN_NAMES: dict[str, tuple[str, str]] = {
    "embeddings": ("embedder", "a LangChain Embeddings object is taken as it is"),
    "embedding": ("embedder", "a LangChain Embeddings object is taken as it is"),
    "embed_model": ("embedder", "a LlamaIndex BaseEmbedding is taken as it is"),
    "distance_threshold": (
        "threshold",
        "a cosine similarity, where langchain-redis's distance_threshold is a cosine "
        "distance: threshold = 1 - distance_threshold (distance_threshold=0.2 is "
        "threshold=0.8)",
    ),
    "score_threshold": (
        "threshold",
        f"{_SIMILARITY}: a similarity score_threshold is the same number, a distance one "
        "is 1 - score_threshold (0.2 is threshold=0.8)",
    ),
    "similarity_threshold": ("threshold", f"{_SIMILARITY}: the same number"),
}


def _hint(name: str, valid: list[str], elsewhere: str) -> str:
    ours = FOREIGN_NAMES.get(name)
    if ours is not None:
        if ours[0] in valid:
            return f"{name}=: it is {ours[0]}= here, {ours[1]}"
        return f"{name}=: agent-cache calls it {ours[0]}=, an argument of {elsewhere}; {ours[1]}"
    close = difflib.get_close_matches(name, valid, n=3, cutoff=0.6)
    if close:
        return f"{name}=: did you mean {' or '.join(c + '=' for c in close)}?"
    return f"{name}= (it takes {', '.join(sorted(valid))})"


def reject_unknown(
    owner: str, given: Iterable[str], valid: Iterable[str], *, elsewhere: str = "LayeredCache"
) -> None:
    """Raise when ``given`` holds a name outside ``valid``; nothing else happens.

    Args:
        owner: the class the user called, named in the message.
        given: the keyword names passed.
        valid: the names ``owner`` takes.
        elsewhere: where a known foreign name's agent-cache argument lives when ``owner``
            does not take it (e.g. ``threshold=`` on the ``LayeredCache`` passed as ``cache=``).

    Raises:
        ConfigurationError: one or more unknown names, each with its hint.
    """
    names = sorted(set(valid))
    unknown = sorted(set(given) - set(names))
    if unknown:
        hints = "; ".join(_hint(name, names, elsewhere) for name in unknown)
        raise ConfigurationError(f"{owner}() does not take {hints}")
