"""scripts/with_postgres.py's WITH_POSTGRES_OPTIONS, which lets a benchmark run on a durable
(or profiled) throwaway server instead of the default non-durable one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark_smoke

REPO_ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import os, psycopg\n"
    "with psycopg.connect(os.environ['DATABASE_URL']) as conn:\n"
    "    print(*(conn.execute(f'SHOW {n}').fetchone()[0] for n in ('fsync', 'max_connections')))\n"
)


def _settings(extra: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    if extra is not None:
        env["WITH_POSTGRES_OPTIONS"] = extra
    done = subprocess.run(
        [sys.executable, "scripts/with_postgres.py", "--", sys.executable, "-c", SHOW],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_default_server_is_not_durable() -> None:
    assert _settings(None) == ["off", "200"]


def test_extra_options_override_the_defaults() -> None:
    assert _settings("-c fsync=on") == ["on", "200"]
