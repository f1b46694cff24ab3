#!/usr/bin/env python3
"""Regenerate the screenshots docs/admin.md shows, from the browser tests.

Usage (from the repository root, after ``make venv``)::

    .venv/bin/python scripts/docs_screenshots.py          # run tests/browser, then copy
    .venv/bin/python scripts/docs_screenshots.py --copy   # copy what the last run saved

The browser tests (tests/browser/) drive headless Chromium through the operator's stories
against the example project with real worker processes, and save a screenshot of each step
under artifacts/browser/<python>-<django>/<test module>/ (see tests/browser/conftest.py). This
script runs them against a throwaway PostgreSQL (scripts/with_postgres.py) and copies the steps
the documentation shows to docs/images/ under the names docs/admin.md uses. It fails, copying
nothing, when the tests fail or a screenshot is missing, and says which image of docs/admin.md
it does not produce, so a page and its images do not drift apart.
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# docs/images/<name> <- artifacts/browser/<python>-<django>/<test module>/<screenshot>.
SHOWN = {
    "admin-job-completed.png": "test_admin_browser/06-job-completed.png",
    "admin-dlq-list.png": "test_admin_browser/03-dlq-list.png",
    "admin-dlq-detail.png": "test_admin_browser/04-dlq-detail.png",
    "admin-dlq-purge-confirm.png": "test_admin_browser/07-dlq-purge-confirm.png",
    "admin-dlq-retried.png": "test_admin_browser/05-dlq-retried.png",
    "admin-queue-health.png": "test_live_console/10-queue-health-live.png",
    "admin-queue-health-1024.png": "test_admin_browser/02b-queue-health-1024-scrolled.png",
    "admin-cron.png": "test_live_console/12-cron-schedules.png",
    "admin-queue-descriptors.png": "test_live_console/14-queue-descriptors-drift.png",
    "admin-runtimes.png": "test_live_console/11-runtimes-running-now.png",
}


def artifacts() -> Path:
    """Where this interpreter's run of the browser tests saves its screenshots (the same
    directory as tests/browser/conftest.py's ARTIFACTS)."""
    import django

    name = f"py{platform.python_version()}-django{django.get_version()}"
    return ROOT / "artifacts" / "browser" / name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--copy", action="store_true", help="only copy the screenshots of the last run"
    )
    options = parser.parse_args()
    shown = set(re.findall(r"\(images/([\w.-]+\.png)\)", (ROOT / "docs/admin.md").read_text()))
    if unknown := sorted(shown - SHOWN.keys()):
        print(f"docs/admin.md shows images no browser test takes: {unknown}", file=sys.stderr)
        return 1
    if not options.copy:
        command = [
            sys.executable,
            str(ROOT / "scripts/with_postgres.py"),
            "--",
            sys.executable,
            "-m",
            "pytest",
            "tests/browser",
            "-q",
        ]
        if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:
            print("the browser tests failed: no screenshot copied", file=sys.stderr)
            return 1
    source = artifacts()
    missing = [shot for shot in SHOWN.values() if not (source / shot).is_file()]
    if missing:
        print(f"not in {source}: {missing}", file=sys.stderr)
        return 1
    for name, shot in sorted(SHOWN.items()):
        shutil.copyfile(source / shot, ROOT / "docs/images" / name)
        print(f"docs/images/{name} <- {shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
