"""The built wheel carries every file of the package, not only its Python modules: an editable
install reads templates and SQL from the checkout and would hide a file the wheel leaves out."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tracked(*paths: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return [line for line in listed.stdout.splitlines() if line]


def test_the_wheel_holds_every_file_of_the_package(tmp_path: Path) -> None:
    # Built from a copy of the tracked files, as from a clean clone: setuptools' build/
    # directory in a working checkout keeps files an earlier build copied.
    source = tmp_path / "source"
    for name in tracked():
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), "."],
        cwd=source,
        check=True,
    )
    (wheel,) = out.glob("awa_django-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    expected = set(tracked("awa_django"))
    assert any(name.endswith(".html") for name in expected), "the admin templates are tracked"
    assert sorted(expected - in_wheel) == []
