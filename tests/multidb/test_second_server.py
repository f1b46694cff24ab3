"""scripts/with_postgres.py --second: the second throwaway server the tests of queues in
another database use, exported as DATABASE_URL_2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PORTS = (
    "import os, psycopg\n"
    "for name in ('DATABASE_URL', 'DATABASE_URL_2'):\n"
    "    with psycopg.connect(os.environ[name]) as conn:\n"
    "        print(conn.execute('SELECT inet_server_port()').fetchone()[0])\n"
)


def test_second_starts_only_the_server_not_given() -> None:
    # DATABASE_URL (this run's server) is kept; only the second server is started.
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL_2"}
    done = subprocess.run(
        [sys.executable, "scripts/with_postgres.py", "--second", "--", sys.executable, "-c", PORTS],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split()
    assert first != second
    assert "as DATABASE_URL_2" in done.stderr and "as DATABASE_URL " not in done.stderr
