"""Check that the installed llama.cpp libraries run on any x86-64 host the rest runs on.

llama-cpp-python compiles llama.cpp at install time. Built with ``GGML_NATIVE`` (its default)
it uses every instruction of the build machine: AMX tiles or AVX-512 on one Xeon crash with a
general protection fault on another host or VM. The Makefile builds with ``GGML_NATIVE=OFF``
and an x86-64-v3 baseline; this script disassembles the installed ``libggml*.so`` and
``libllama.so`` and fails if any AVX-512 (``zmm``/``k`` mask registers) or AMX
(``ldtilecfg``, ``tdp*``) instruction is present, so a wheel built with other flags (pip's
wheel cache, a copied layer) is caught.

Usage: ``python scripts/check_llama_build.py`` (exit 0: portable, 1: not, 2: cannot check).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

# AVX-512 uses zmm registers or opmask registers k1-k7; AMX uses tile instructions.
_FORBIDDEN = re.compile(r"%zmm\d+|\{%k[1-7]\}|\bldtilecfg\b|\btdpb[a-z]*\b|\btileloadd")


def libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("llama_cpp is not installed")
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    found = {p.resolve() for p in lib.glob("lib*.so*") if p.is_file()}  # links once
    if not any(p.name.startswith("libggml") for p in found):
        raise FileNotFoundError(f"no libggml*.so under {lib}")
    return sorted(found)


def offending(path: Path, limit: int = 3) -> list[str]:
    """The first ``limit`` disassembled lines of ``path`` with AVX-512 or AMX instructions."""
    proc = subprocess.Popen(
        ["objdump", "-d", "--no-show-raw-insn", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    hits: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if _FORBIDDEN.search(line):
            hits.append(line.strip())
            if len(hits) >= limit:
                break
    proc.kill()
    proc.wait()
    return hits


def main() -> int:
    if shutil.which("objdump") is None:
        print("check_llama_build: objdump not found (apt-get install binutils)", file=sys.stderr)
        return 2
    try:
        libs = libraries()
    except FileNotFoundError as exc:
        print(f"check_llama_build: {exc}", file=sys.stderr)
        return 2
    bad = 0
    for lib in libs:
        hits = offending(lib)
        if hits:
            bad += 1
            print(f"NOT PORTABLE {lib.name}: {hits[0]}", file=sys.stderr)
        else:
            print(f"portable {lib.name}")
    if bad:
        print(
            "llama.cpp was built for one CPU (AVX-512/AMX): rebuild with `make install` "
            "(GGML_NATIVE=OFF, no pip wheel cache)",
            file=sys.stderr,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
