"""Upgrading from a release: a database created and filled by v0.1.0 (its wheel, as users
installed it, kept in tests/migrations/releases/) is migrated by the current code while a
v0.1.0 worker still runs a job, then drained by a current worker. Every job ends where it
should, each ran as often as it should, and the schema equals a fresh install's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.fresh_project import ROOT, FreshDatabase, fresh_database, project_env, run_django
from tests.migrations.catalog import schema_catalog

HERE = Path(__file__).resolve().parent
RELEASES = HERE / "releases"
PROJECT = HERE / "upgrade_project"
RELEASED_MIGRATION_DIRS = ("awa_django/migrations/", "awa_django/sql/migrations/")


def release_wheel(version: str) -> Path:
    (wheel,) = RELEASES.glob(f"awa_django-{version}-*.whl")
    return wheel


def migrations_since(version: str) -> list[str]:
    """The checkout's awa_django migrations that the release's wheel does not have."""
    with zipfile.ZipFile(release_wheel(version)) as wheel:
        released = {
            Path(name).stem
            for name in wheel.namelist()
            if name.startswith("awa_django/migrations/0")
        }
    current = sorted(path.stem for path in (ROOT / "awa_django" / "migrations").glob("0*.py"))
    return [name for name in current if name not in released]


@dataclass
class Side:
    """One version of awa_django running the upgrade project. The working directory is outside
    the checkout: ``python -m`` puts it first on ``sys.path``."""

    env: dict[str, str]
    cwd: Path

    def django(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = run_django(self.env, list(args), cwd=self.cwd)
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done

    def step(self, call: str) -> object:
        done = self.django("shell", "-c", f"from upgrade_app import steps; steps.{call}")
        return json.loads(done.stdout.strip().splitlines()[-1])

    def worker(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "django", "awa_worker", "--noreload", *args],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


def stop(worker: subprocess.Popen[str]) -> str:
    worker.send_signal(signal.SIGTERM)
    output, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, output
    return output


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def database_env(database: FreshDatabase, state: Path) -> dict[str, str]:
    params = {
        "NAME": database.name,
        "HOST": database.host,
        "PORT": database.port,
        "USER": database.user,
        "PASSWORD": database.password,
    }
    return {"UPGRADE_DB": json.dumps(params), "UPGRADE_STATE": str(state)}


@pytest.fixture
def released_package(tmp_path: Path) -> Path:
    """v0.1.0's wheel unpacked: a pure-Python wheel is importable as it is."""
    target = tmp_path / "released"
    with zipfile.ZipFile(release_wheel("0.1.0")) as wheel:
        wheel.extractall(target)
    return target


@pytest.fixture
def upgrade_database() -> Iterator[FreshDatabase]:
    with fresh_database("awa_upgrade") as database:
        yield database


def runs(state: Path) -> list[tuple[int, int, str, str, str]]:
    lines = (state / "runs.log").read_text().splitlines()
    return [
        (int(i), int(a), kind, event, where) for i, a, kind, event, where in map(str.split, lines)
    ]


def test_upgrade_from_v0_1_0_while_its_worker_runs(tmp_path, released_package, upgrade_database):
    state = tmp_path / "state"
    state.mkdir()
    extra = database_env(upgrade_database, state)
    old = Side({**project_env("upgrade_settings", released_package, PROJECT), **extra}, state)
    new = Side({**project_env("upgrade_settings", PROJECT, ROOT), **extra}, state)
    old_code = str(released_package / "awa_django")
    new_code = str(ROOT / "awa_django")

    # v0.1.0 creates the schema and runs the jobs that settle before the upgrade.
    old.django("migrate", "--no-input")
    settled = old.step("settled_jobs()")
    old.django("awa_worker", "--burst")
    pending = old.step("pending_jobs()")
    assert old.step("unique_conflict()") == "conflict"
    ids = {**settled, **pending}
    every = [job_id for group in ids.values() for job_id in group]
    before = old.step(f"states({every})")
    assert {before[str(i)] for i in ids["completed"]} == {"completed"}
    assert before[str(ids["failed"][0])] == "failed"
    assert before[str(ids["dlq"][0])] == "dlq"
    assert before[str(ids["retryable"][0])] == "retryable"
    assert before[str(ids["scheduled"][0])] == "scheduled"
    assert {before[str(i)] for i in ids["available"] + ids["unique"]} == {"available"}

    # A v0.1.0 worker holds the blocker (and leads maintenance) while the upgrade runs.
    old_worker = old.worker("--queue", "live")
    try:
        blocker = ids["running"][0]
        wait_for(
            lambda: (
                (state / "runs.log").exists()
                and any(r[0] == blocker and r[3] == "started" for r in runs(state))
            ),
            30,
            "the v0.1.0 worker to start the blocker",
        )
        assert old.step(f"states([{blocker}])") == {str(blocker): "running"}

        migrated = new.django("migrate", "--no-input")
        assert "Traceback" not in migrated.stderr
        for name in migrations_since("0.1.0"):
            assert f"Applying awa_django.{name}... OK" in migrated.stdout
        spread = new.step("spread_jobs()")
        every.extend(spread)
        flow = new.step("a_workflow()")
        every.extend(flow["jobs"])
        spread.extend(flow["jobs"])
        new_worker = new.worker()
        try:
            assert new.step(f"complete_parked({str(state)!r})") == "completed"
            cron = new.step("trigger_cron()")
            assert cron["schedules"] == ["upgrade_app.nightly"]
            assert cron["history"][0] == cron["fired"]
            every.append(cron["fired"])
            (state / "release").touch()
            stop(old_worker)
            terminal = {"completed", "failed", "dlq"}
            wait_for(
                lambda: set(new.step(f"states({every})").values()) <= terminal,
                60,
                "the current worker to drain every job",
            )
            # The migrated awa.close_batch puts a job whose kind its worker has no handler for
            # back to wait for one that has, its only attempt given back.
            nobody = new.step("nobody_knows()")
            wait_for(
                lambda: new.step(f"record({nobody})")["errors"],
                60,
                "the current worker to try the job of a kind it does not know",
            )
            assert new.step(f"record({nobody})") in (
                {"state": state, "attempt": 0, "errors": ["awa_django.exceptions.UnknownJobKind"]}
                for state in ("retryable", "available")
            )
            assert new.step(f"workflow_state({flow['id']})") == "completed"
        finally:
            stop(new_worker)
    finally:
        if old_worker.poll() is None:
            old_worker.kill()
            old_worker.wait()

    after = new.step(f"states({every})")
    expected = {job_id: "completed" for job_id in every}
    expected[ids["failed"][0]] = "failed"
    expected[ids["dlq"][0]] = "dlq"
    assert {int(k): v for k, v in after.items()} == expected

    log = runs(state)
    finished = [(job_id, attempt) for job_id, attempt, _, event, _ in log if event == "ran"]
    assert [key for key, count in Counter(finished).items() if count > 1] == []
    ran = Counter(job_id for job_id, _ in finished)
    assert ran[ids["retryable"][0]] == 2
    assert all(ran[job_id] == 1 for job_id in every if job_id != ids["retryable"][0])
    where = {(job_id, attempt): code for job_id, attempt, _, event, code in log if event == "ran"}
    assert where[(blocker, 1)] == old_code
    for job_id in ids["available"] + ids["scheduled"] + ids["unique"] + [cron["fired"]] + spread:
        assert where[(job_id, 1)] == new_code
    assert where[(ids["retryable"][0], 2)] == new_code

    # The upgraded schema is the one a fresh install of the current code creates.
    with fresh_database("awa_fresh_install") as fresh:
        Side(
            {**project_env("upgrade_settings", PROJECT, ROOT), **database_env(fresh, state)}, state
        ).django("migrate", "--no-input")
        with psycopg.connect(fresh.conninfo()) as conn, conn.cursor() as cursor:
            fresh_catalog = schema_catalog(cursor)
    with psycopg.connect(upgrade_database.conninfo()) as conn, conn.cursor() as cursor:
        assert schema_catalog(cursor) == fresh_catalog


def test_released_migrations_are_never_edited():
    with zipfile.ZipFile(release_wheel("0.1.0")) as wheel:
        released = {
            name: wheel.read(name)
            for name in wheel.namelist()
            if name.startswith(RELEASED_MIGRATION_DIRS) and not name.endswith("/")
        }
    assert any(name.endswith("0001_substrate.py") for name in released)
    edited = [name for name, content in released.items() if (ROOT / name).read_bytes() != content]
    missing = [name for name in released if not (ROOT / name).exists()]
    assert (edited, missing) == ([], [])
