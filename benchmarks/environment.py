"""What the figures were measured on: versions, machine, server settings and git commit.

Recorded in every results file, because a throughput number means little without the machine,
the PostgreSQL settings (the throwaway cluster is not durable) and the code it came from.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import django
import psycopg
import psycopg_pool
from django.db import connection

REPO_ROOT = Path(__file__).resolve().parent.parent
# Server settings that change what a commit costs, or how much fits in memory.
PG_SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "shared_buffers",
    "work_mem",
    "max_connections",
    "jit",
)


def _git(*args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    # Only the final newline goes: porcelain status lines start with a meaningful space.
    return result.stdout.rstrip("\n") if result.returncode == 0 else ""


def git_info() -> dict[str, Any]:
    # Other work may be uncommitted in the same tree; listing changed paths under awa_django/
    # says whether the code measured is exactly the commit.
    status = _git("status", "--porcelain", "--", "awa_django")
    return {
        "commit": _git("rev-parse", "HEAD"),
        "subject": _git("log", "-1", "--format=%s"),
        "uncommitted_awa_django_changes": [line[3:] for line in status.splitlines() if line],
    }


def _meminfo_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "memory_gib": _meminfo_total_gib(),
        "platform": platform.platform(),
        "loadavg_at_start": list(os.getloadavg()),
    }


def postgres_info() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version'), version()")
        server_version, version = cursor.fetchone()
        cursor.execute(
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY (%s)", [list(PG_SETTINGS)]
        )
        settings = {
            name: f"{setting}{'' if unit is None else ' ' + unit}"
            for name, setting, unit in cursor.fetchall()
        }
    params = connection.settings_dict
    return {
        "server_version": server_version,
        "version": version,
        "settings": settings,
        # Where the server was, never the credentials.
        "database": f"{params['HOST']}:{params['PORT']}/{params['NAME']}",
    }


def versions() -> dict[str, str]:
    return {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "psycopg_impl": psycopg.pq.__impl__,
        "psycopg_pool": psycopg_pool.__version__,
        "awa_django": metadata.version("awa-django"),
    }


def collect() -> dict[str, Any]:
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_info(),
        "versions": versions(),
        "machine": machine_info(),
        "postgres": postgres_info(),
    }
