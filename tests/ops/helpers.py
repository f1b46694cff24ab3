"""What the operator-command tests share: running ``manage.py`` as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT, subprocess_database_url


def manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` on the test database, for exit codes and what reaches the terminal."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**os.environ, "DATABASE_URL": subprocess_database_url(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
