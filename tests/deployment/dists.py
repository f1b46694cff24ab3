"""The package as it is published: ``python -m build`` makes the sdist from a copy of the
git-tracked files, as from a clean clone (setuptools' build/ directory in a working checkout
keeps files an earlier build copied), then the wheel from that sdist, as pip would from PyPI.
An editable install reads templates and SQL from the checkout and would hide a file either
artifact leaves out."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tracked(*paths: str) -> list[str]:
    """The files git tracks in the checkout (under ``paths``, if given)."""
    listed = subprocess.run(
        ["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line for line in listed.stdout.splitlines() if line]


@dataclass(frozen=True)
class Dists:
    sdist: Path
    wheel: Path


def build_dists(workdir: Path) -> Dists:
    """Build the sdist and, from it, the wheel in ``workdir``; return their paths."""
    source = workdir / "source"
    for name in tracked():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    out = workdir / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (sdist,) = out.glob("awa_django-*.tar.gz")
    (wheel,) = out.glob("awa_django-*.whl")
    return Dists(sdist=sdist, wheel=wheel)
