"""scripts/ensure_test_tools.sh, which ``make test`` runs first, as a real subprocess.
ENSURE_TEST_TOOLS_ROOT moves the fixed paths of chromium, chromedriver and pgbouncer into a
temporary directory and PATH holds only a directory of the test's own, so each tool is missing
or present as the test makes it, and no real apt-get runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fresh_project import ROOT

SCRIPT = ROOT / "scripts" / "ensure_test_tools.sh"
BASH = shutil.which("bash") or "/bin/bash"
FIXED_PATHS = {
    "chromium": "usr/bin/chromium",
    "chromedriver": "usr/bin/chromedriver",
    "pgbouncer": "usr/sbin/pgbouncer",
}
# Stands in for apt-get: logs its arguments and "installs" a package by creating the file
# its tool is looked for at, under ENSURE_TEST_TOOLS_ROOT.
FAKE_APT_GET = """#!{python}
import os, sys
from pathlib import Path
root = Path(os.environ["ENSURE_TEST_TOOLS_ROOT"])
with open(root / "apt-get.log", "a") as log:
    print(*sys.argv[1:], file=log)
targets = {{"chromium": "usr/bin/chromium", "chromium-driver": "usr/bin/chromedriver",
           "pgbouncer": "usr/sbin/pgbouncer"}}
if sys.argv[1] == "install":
    for package in sys.argv[2:]:
        if package in targets:
            target = root / targets[package]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("#!/bin/sh\\n")
            target.chmod(0o755)
"""


def executable(path: Path, text: str = "#!/bin/sh\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def run_script(tmp_path: Path, *, present: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in present:
        executable(root / FIXED_PATHS[tool])
    env = {**os.environ, "ENSURE_TEST_TOOLS_ROOT": str(root), "PATH": str(bin_dir)}
    return subprocess.run(
        [BASH, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )


ALL_MISSING = (
    "missing chromium, chromedriver, pgbouncer; "
    "install them (Debian: apt-get install chromium chromium-driver pgbouncer)"
)
ONE_MISSING = "missing chromedriver; install them (Debian: apt-get install chromium-driver)"


@pytest.mark.parametrize(
    ("present", "line"), [((), ALL_MISSING), (("chromium", "pgbouncer"), ONE_MISSING)]
)
def test_without_apt_get_it_stops_with_one_line_naming_what_to_install(tmp_path, present, line):
    result = run_script(tmp_path, present=present)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"make test: {line}\n"


def test_with_every_tool_present_it_says_nothing(tmp_path):
    result = run_script(tmp_path, present=("chromium", "chromedriver", "pgbouncer"))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    # pgbouncer counts on PATH as well as at /usr/sbin.
    executable(tmp_path / "bin" / "pgbouncer")
    (tmp_path / "root" / FIXED_PATHS["pgbouncer"]).unlink()
    result = run_script(tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_with_apt_get_it_installs_as_root_or_says_to_run_as_root(tmp_path):
    executable(tmp_path / "bin" / "apt-get", FAKE_APT_GET.format(python=sys.executable))
    result = run_script(tmp_path, present=("chromium",))
    if os.geteuid() != 0:  # and no sudo on this PATH
        assert result.returncode == 1
        assert result.stderr == (
            "make test: missing chromedriver, pgbouncer; install them (Debian: apt-get install "
            "chromium-driver pgbouncer) or run as root so make test installs them\n"
        )
        return
    assert result.returncode == 0, result.stderr
    assert result.stderr == "make test: installing chromium-driver pgbouncer with apt-get\n"
    log = (tmp_path / "root" / "apt-get.log").read_text().splitlines()
    assert log == ["update", "install -y --no-install-recommends chromium-driver pgbouncer"]
    assert all((tmp_path / "root" / path).exists() for path in FIXED_PATHS.values())
