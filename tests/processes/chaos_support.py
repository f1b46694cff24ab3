"""What the chaos tests share (tests/processes/test_chaos.py, test_harder_chaos.py,
tests/workflows/test_workflow_chaos.py): a PostgreSQL cluster of the test's own that it may
restart or crash, ``manage.py`` and SQL against it, and the checks every chaos run ends with."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from types import ModuleType

import psycopg
import pytest

from tests.conftest import REPO_ROOT, wait_until

# The chaos tests' own jobs. The worker subprocesses run the example project, whose shop app
# declares a nightly periodic job (03:00 UTC): a run that spans that minute finds one more
# completed job, which is not the test's.
OWN_JOBS = "kind LIKE 'tests.%%'"


def load_with_postgres() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "with_postgres", REPO_ROOT / "scripts" / "with_postgres.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cluster() -> Iterator[object]:
    """A private server the test may restart without disturbing the suite's own."""
    with_postgres = load_with_postgres()
    server = with_postgres.Cluster()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def durable_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A private server that keeps what it acknowledged through a crash: the suite's servers
    commit asynchronously (``synchronous_commit=off``), which a ``-m immediate`` stop may
    legitimately lose the last commits of; this one waits for its WAL at each commit (the
    operating system does not crash here, so ``fsync`` may stay off)."""
    extra = os.environ.get("WITH_POSTGRES_OPTIONS", "")
    monkeypatch.setenv("WITH_POSTGRES_OPTIONS", f"{extra} -c synchronous_commit=on".strip())
    with_postgres = load_with_postgres()
    server = with_postgres.Cluster()
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _pg_ctl(server: object, *args: str) -> None:
    with_postgres = load_with_postgres()
    pg_ctl = [str(server.bindir / "pg_ctl"), "-w", "-t", "60", "-D", str(server.data)]
    # The new server must not inherit a pipe of ours, or waiting for pg_ctl would wait for it.
    subprocess.run(
        with_postgres.as_user(server.user, [*pg_ctl, *args]),
        cwd=server.tmp,
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=90,
    )


def restart(server: object) -> None:
    """A clean restart: sessions are ended, nothing in flight is lost."""
    _pg_ctl(server, "-l", str(server.logfile), "-m", "fast", "restart")


def crash(server: object, down_s: float) -> None:
    """A crash: ``pg_ctl stop -m immediate`` (no checkpoint, every backend killed at once, the
    next start replays the WAL), the server down for ``down_s``, then started again with the
    options it ran with."""
    with_postgres = load_with_postgres()
    _pg_ctl(server, "-m", "immediate", "stop")
    time.sleep(down_s)
    options = with_postgres.SERVER_OPTIONS.format(port=server.port, sockdir=server.tmp / "sock")
    extra = os.environ.get("WITH_POSTGRES_OPTIONS", "").strip()
    _pg_ctl(server, "-l", str(server.logfile), "-o", f"{options} {extra}".strip(), "start")


def manage(
    url: str, *args: str, modules: str = "tests.chaos_jobs"
) -> subprocess.CompletedProcess[str]:
    env = {"DATABASE_URL": url, "AWA_JOB_MODULES": modules}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def query(url: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def create_runs_table(url: str) -> None:
    """The table the test handlers record each run in (tests.jobs.record_run)."""
    query(
        url,
        "CREATE TABLE tests_job_runs (id bigserial PRIMARY KEY, job_id bigint, "
        "run_lease bigint, attempt integer, note text, at timestamptz DEFAULT clock_timestamp())",
    )


def assert_audit_holds(url: str) -> None:
    """The operator's audit (docs/operations.md#the-invariant-audit) finds every invariant
    held."""
    audit = subprocess.run(
        [sys.executable, "manage.py", "awa_audit"],
        cwd=REPO_ROOT,
        env={**os.environ, "DATABASE_URL": url, "AWA_JOB_MODULES": "tests.chaos_jobs"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def wait_settled(url: str, committed: set[int], timeout: float = 60.0) -> None:
    """Until every committed job has completed."""

    def settled() -> bool:
        rows = query(
            url,
            "SELECT count(*) FROM awa.jobs WHERE state = 'completed' AND job_id = ANY (%s)",
            (sorted(committed),),
        )
        return int(rows[0][0]) == len(committed)

    wait_until(settled, timeout=timeout)


def assert_ran_exactly_once(
    url: str, committed: set[int], rolled_back: set[int], *, pruned: bool = False
) -> set[int]:
    """Every committed job completed exactly once, and no attempt of it ran twice; no job whose
    transaction rolled back ever ran, or exists. Returns the jobs that ran more than once: each
    run had its own run lease (a rescue after a kill or a lost connection), which the caller
    holds against the faults it made. ``pruned``: the ring's prune may have reclaimed completed
    jobs (no retention), so only those still there are counted by state."""
    states = dict(
        query(url, f"SELECT state, count(*) FROM awa.jobs WHERE {OWN_JOBS} GROUP BY state")
    )
    ids = {int(row[0]) for row in query(url, f"SELECT job_id FROM awa.jobs WHERE {OWN_JOBS}")}
    if pruned:
        assert set(states) <= {"completed"}, states
        assert ids <= committed, sorted(ids - committed)[:20]
    else:
        assert states == {"completed": len(committed)}, states
        assert ids == committed
    done = query(
        url,
        "SELECT job_id, count(*) FROM awa.done_entries WHERE outcome = 'completed' "
        "GROUP BY job_id HAVING count(*) <> 1",
    )
    assert done == []
    twice = query(
        url,
        "SELECT job_id, run_lease FROM tests_job_runs GROUP BY job_id, run_lease "
        "HAVING count(*) > 1",
    )
    assert twice == []
    runs = dict(query(url, "SELECT job_id, count(*) FROM tests_job_runs GROUP BY job_id"))
    ran = {int(job_id) for job_id in runs}
    assert committed <= ran, sorted(committed - ran)[:20]
    assert not (ran & rolled_back), sorted(ran & rolled_back)
    return {int(job_id) for job_id, count in runs.items() if int(count) > 1}
