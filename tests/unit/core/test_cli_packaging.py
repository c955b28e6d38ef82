"""The wheel and the sdist carry the LICENSE and the SPDX license expression, and nothing
of the repository that is not the package: no tests, docs, evaluation data or ../shared."""

from __future__ import annotations

import email.parser
import importlib.util
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _build_command(outdir: Path) -> list[str]:
    """``python -m build``: with this environment's setuptools when it meets pyproject's
    build requirement (setuptools>=77, for the SPDX license), fast and offline; else in
    an isolated environment from the package index, as for a release."""
    assert importlib.util.find_spec("build") is not None, "the dev set installs `build`"
    cmd = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(outdir)]
    try:
        import setuptools

        if int(setuptools.__version__.split(".")[0]) >= 77:
            cmd.append("--no-isolation")
    except ImportError:
        pass
    return cmd


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    outdir = tmp_path_factory.mktemp("dist")
    res = subprocess.run(
        [*_build_command(outdir), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=outdir,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (wheel,) = outdir.glob("*.whl")
    (sdist,) = outdir.glob("*.tar.gz")
    return wheel, sdist


def _not_packaged(name: str) -> bool:
    parts = Path(name).parts
    return not (
        {"tests", "docs", "shared", "examples", "scripts", ".ci"} & set(parts)
        or name.endswith((".jsonl", ".parquet", ".csv"))
    )


def test_the_wheel(dists: tuple[Path, Path]) -> None:
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(zf.read(meta_name).decode())
        licenses = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert licenses, names
        text = zf.read(licenses[0]).decode()
    assert "Apache License" in text and "END OF TERMS AND CONDITIONS" in text
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers and "Development Status :: 3 - Alpha" in classifiers
    urls = meta.get_all("Project-URL") or []
    assert {u.split(",")[0] for u in urls} >= {"Homepage", "Documentation", "Issues", "Changelog"}
    assert "agent_cache/cli.py" in names and "agent_cache/py.typed" in names
    # the analysis' WordNet synonyms travel with the code (nothing is fetched at run time)
    assert "agent_cache/data/wordnet_synonyms.txt.gz" in names
    assert [n for n in names if not _not_packaged(n)] == []


def test_the_sdist(dists: tuple[Path, Path]) -> None:
    _, sdist = dists
    with tarfile.open(sdist) as tf:
        names = [m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name]
    assert "LICENSE" in names and "pyproject.toml" in names and "agent_cache/cli.py" in names
    assert "agent_cache/data/wordnet_synonyms.txt.gz" in names
    assert [n for n in names if not _not_packaged(n)] == []
