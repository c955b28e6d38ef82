"""The first burst of concurrent misses after start loads the analysis data once.

lemminflect loads its lemma tables on first use without a lock: before, every thread of
the first burst of concurrent misses loaded them (16 threads of a new process: ~3 s
on 2 cores, against ~0.2 s for a burst once loaded). Run in a fresh interpreter so that
the tables are not loaded yet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = textwrap.dedent(
    """
    import threading
    from lemminflect.codecs import LemmaLUCodec
    from agent_cache.differences import analyze

    loads = []
    real = LemmaLUCodec.LemmaLUCodec.load

    def counted(*args, **kwargs):
        loads.append(1)
        return real(*args, **kwargs)

    LemmaLUCodec.LemmaLUCodec.load = staticmethod(counted)
    go = threading.Barrier(16)

    def one(i):
        go.wait()
        analyze(f"How do I reset router number {i} passwords?",
                f"How can I reset router number {i} passwords today?")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(len(loads))
    """
)


def test_sixteen_threads_meeting_the_analysis_first_load_its_tables_once() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "1", out.stdout
