"""How long the admin's pages take over a history with jobs in every state, and whether each
state filter finds its jobs on page 1.

Usage (it EMPTIES the awa tables of the database it runs on)::

    DATABASE_URL=postgres://... python -m benchmarks.admin_pages [--jobs 50000] [--reps 5]
        [--hot-lane 28000] [--dead-letters N] [--no-plans]

It builds ``--jobs`` jobs through the real paths (enqueue, a burst worker, claims, cancel, the
DLQ), the rare states first so that they sit under the whole history: a few running and
waiting_external attempts, cancelled, failed and retryable jobs, then scheduled jobs and DLQ
entries (a tenth each), completed jobs (half), with ``--hot-lane`` that many more through one
lane, claimed and closed at once, and available ones (the rest). It then renders
each page through Django's test client as a superuser and prints the median time and query
count of each, and for each state page how many jobs of that state page 1 lists against how
many there are. Then it times the public ``awa.list_jobs`` for each state and three name
filters, beside the same page read through the ``awa.jobs`` view (how it was read before) and
the page's records read by id (the floor every listing ends with). It exits non-zero if a
state page misses jobs of its state or a listing differs from the view's. The example
project's settings are used because they install the admin.

Beside those (issue #36, item 1) it builds the rest of a production shape: ``--dead-letters``
dead letters (a tenth of the jobs by default), half of them failed in the ring and moved to the
DLQ (a fifth of those purged, leaving their failed closures and purge markers), half inserted
as entries whose ring slot was pruned; jobs in two undeclared queues; chains of workflow steps
run by the burst worker; cron schedules with fires. It times every admin page, the counts and
confirmations of the bulk actions and the bulk walks themselves (each inside a transaction
rolled back, so every repetition acts on the same history), and records the executed plan
(``EXPLAIN (ANALYZE, BUFFERS)``, JIT as the page ran it) of every statement each page ran, into
``benchmarks/results/admin-pages-<UTC time>.json``; the statements whose plan reads a big table
whole (a sequential scan of more than ``BIG_SCAN`` rows) or merge-joins are printed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import django

from benchmarks import history_fill

OK_KIND = "bench.admin_ok"
FAILS_KIND = "bench.admin_fails"
RARE = 50  # cancelled, failed and retryable jobs each
OPEN = 5  # running and waiting_external attempts each
STEP_KIND = "bench.admin_step"
WORKFLOWS = 200  # chains of three steps, run by the burst worker
UNDECLARED = ("imports", "reports")  # queues no setting declares
CRON = ("bench.every_minute", "bench.hourly", "bench.nightly")
CRON_FIRES = 20  # triggers of each schedule
# A sequential scan reading more rows than this, in a statement an admin page runs, is flagged.
BIG_SCAN = 5_000
RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--hot-lane",
        type=int,
        default=0,
        help="jobs put through one lane of queue default (one enqueue_many, claimed and closed "
        "at once, as a burst through one queue leaves the ring) above the open attempts; "
        "counted in --jobs (issue #36: 28,000 made 'what is running?' take minutes)",
    )
    parser.add_argument(
        "--dead-letters",
        type=int,
        default=None,
        help="DLQ entries (default a tenth of --jobs): half failed in the ring and moved, a "
        "fifth of those purged; half inserted as entries whose ring slot was pruned",
    )
    parser.add_argument("--no-plans", action="store_true", help="do not record plans")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument(
        "--jobs-page",
        action="store_true",
        help="only time the Jobs page (its list, and its state count) with the default filters "
        "and with state=completed over the history the database holds, which it keeps (the "
        "admin's own tables are migrated); print the medians as one JSON line "
        "(benchmarks/depth.py's history checkpoints)",
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    django.setup()
    if args.jobs_page:
        print(json.dumps(jobs_page(args.reps)))
        return

    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import (
        CaptureQueriesContext,
        override_settings,
        setup_test_environment,
    )

    import awa_django as awa
    from awa_django.conf import get_settings
    from awa_django.core.claimed_job import claimed_job_rows
    from awa_django.declarations.jobs import JobContext, registry
    from awa_django.maintenance.queue_stats import QueueSampler, QueueStatsConfig
    from awa_django.storage.browse import JOB_STATES
    from awa_django.storage.connections import connect, open_pool
    from awa_django.storage.queue import ClaimRequest, claim_ready
    from awa_django.storage.statement import run_async
    from awa_django.testing import reset_queue
    from awa_django.worker.process import WorkerProcess, config_from_settings
    from benchmarks import environment

    @awa.job(kind=OK_KIND)
    def succeeds(ctx: JobContext, n: int) -> None:
        return None

    @awa.job(kind=FAILS_KIND)
    def fails(ctx: JobContext, n: int) -> None:
        raise RuntimeError(f"bench failure {n}")

    def burst() -> None:
        config = config_from_settings(get_settings(), queues={"default": 8}, burst=True)
        asyncio.run(WorkerProcess(config, registry.get).run())

    async def claim_open(count: int) -> list[int]:
        async with await connect("default") as conn:
            jobs = await run_async(
                conn,
                claim_ready(
                    ClaimRequest(queue="email", claimed_by="bench", deadline_s=0, aging_s=0),
                    rows=claimed_job_rows,
                    limit=count,
                ),
            )
            return [job.job_id for job in jobs]

    async def sample_queues() -> None:
        pool = await open_pool("default", max_size=1)
        try:
            await QueueSampler(pool, QueueStatsConfig.from_settings(get_settings())).run_once()
        finally:
            await pool.close()

    setup_test_environment()
    call_command("migrate", verbosity=0)
    reset_queue()
    started = time.perf_counter()
    many = awa.enqueue_many
    # Open attempts first: claimed from their own queue, half of them parked on a callback.
    # Each holds a lease whose heartbeat is a day ahead: the burst workers' leader rescues an
    # attempt silent past AWA['HEARTBEAT_STALENESS_S'], and a large build outlasts that.
    many(OK_KIND, [{"n": n} for n in range(2 * OPEN)], queue="email")
    claimed = asyncio.run(claim_open(2 * OPEN))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority,"
            " shard, lane_seq, claimed_by, heartbeat_at, callback_id, callback_timeout_at)"
            " SELECT job_id, run_lease, 0, ready_slot, queue, priority, shard, lane_seq,"
            " claimed_by, now() + interval '1 day',"
            " CASE WHEN job_id = ANY(%(parked)s) THEN gen_random_uuid() END,"
            " CASE WHEN job_id = ANY(%(parked)s) THEN now() + interval '1 day' END"
            " FROM awa.claim_receipts WHERE job_id = ANY(%(claimed)s)",
            {"parked": claimed[:OPEN], "claimed": claimed},
        )
    for job_id in many(OK_KIND, [{"n": n} for n in range(RARE)], queue="default"):
        awa.cancel(job_id)
    many(FAILS_KIND, [{"n": n} for n in range(RARE)], queue="default", max_attempts=1)
    many(FAILS_KIND, [{"n": n} for n in range(RARE)], queue="default", max_attempts=5)
    burst()  # failed, and retryable (their retry is minutes away)
    tenth = args.jobs // 10
    many(OK_KIND, [{"n": n} for n in range(tenth)], run_at=timedelta(days=1))
    dead = tenth if args.dead_letters is None else args.dead_letters
    undeclared = 0
    # Queues another service declares (or one removed from the settings): enqueued while
    # declared, undeclared for the rest of the run.
    queues = {**settings.AWA["QUEUES"], **{queue: {"concurrency": 1} for queue in UNDECLARED}}
    with override_settings(AWA={**settings.AWA, "QUEUES": queues}):
        dead_letters(connection, dead)
        for queue in UNDECLARED:
            # Waiting (no worker takes them) and scheduled.
            undeclared += len(many(OK_KIND, [{"n": n} for n in range(RARE)], queue=queue))
            undeclared += len(
                many(
                    OK_KIND, [{"n": n} for n in range(RARE)], queue=queue, run_at=timedelta(hours=1)
                )
            )
    for n in range(WORKFLOWS):  # run by the burst below
        awa.Workflow(f"bench-{n}").step("a", OK_KIND, args={"n": n}).step(
            "b", OK_KIND, args={"n": n}, after=["a"]
        ).step("c", OK_KIND, args={"n": n}, after=["b"]).enqueue()
    cron_schedules(succeeds)
    burst()
    # Completed jobs (the history builder's chunks: a claim and a close each), then the hot
    # lane in one chunk, as one burst through one queue leaves the ring.
    half = args.jobs // 2
    history_fill.fill(half, OK_KIND, queue="default")
    history_fill.fill(args.hot_lane, OK_KIND, queue="default", chunk=max(args.hot_lane, 1))
    built = half + tenth + dead + undeclared + 3 * WORKFLOWS + len(CRON) * CRON_FIRES
    rest = args.jobs - built - 3 * RARE - 2 * OPEN - args.hot_lane
    for start in range(0, rest, 10_000):
        many(OK_KIND, [{"n": n} for n in range(min(10_000, rest - start))])
    with connection.cursor() as cursor:
        # As autovacuum leaves a table between bursts: statistics, and a visibility map, so
        # index-only probes need not visit the heap (right after the build each one did).
        cursor.execute("VACUUM ANALYZE")
    history_fill.settle()
    # The maintenance leader's sampling pass, as a running leader makes one every
    # QUEUE_STATS_INTERVAL_S: queue health counts the closures after its newest sample from the
    # ring, and without this pass that would be the whole hour's history the builder wrote.
    asyncio.run(sample_queues())
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(job_id) / 2 FROM awa.ready_entries")
        (middle_id,) = cursor.fetchone()
        # Every job's state through the view: a full read, done once here, never by a page.
        cursor.execute("SELECT state, count(*) FROM awa.jobs GROUP BY state")
        totals = {state: 0 for state in JOB_STATES} | dict(cursor.fetchall())
    build_s = time.perf_counter() - started
    print(f"built {sum(totals.values())} jobs in {build_s:.0f} s: {totals}")

    user, _ = User.objects.get_or_create(username="bench-admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(job_id) FROM awa.dlq_entries")
        (dlq_id,) = cursor.fetchone()
        cursor.execute("SELECT min(workflow_id) FROM awa.workflows")
        (workflow_id,) = cursor.fetchone()
    jobs = "/admin/awa_django/job/"
    dlq = "/admin/awa_django/deadletter/"
    health = "/admin/awa_django/queue/"
    pages: dict[str, str] = {
        "jobs, first page": jobs,
        "jobs, middle page": f"{jobs}?before={middle_id}",
        **{f"jobs, state={state}": f"{jobs}?state={state}" for state in JOB_STATES},
        "jobs, kind prefix": f"{jobs}?kind=BENCH.ADMIN_F",
        "jobs, kind prefix, state=failed": f"{jobs}?kind=bench.admin_f&state=failed",
        # The 10 jobs of queue "email" are the oldest of the history.
        "jobs, rare queue prefix": f"{jobs}?queue=EMA",
        "jobs, rare queue, state=running": f"{jobs}?queue=email&state=running",
        "jobs, undeclared queue, state=available": f"{jobs}?queue=reports&state=available",
        "jobs, purged queue, state=failed": f"{jobs}?queue=imports&state=failed",
        # The common kind (nearly every job) in states it holds a few of, or none.
        "jobs, common kind, state=running": f"{jobs}?kind={OK_KIND}&state=running",
        "jobs, common kind, state=cancelled": f"{jobs}?kind={OK_KIND}&state=cancelled",
        "jobs, common kind, state=failed": f"{jobs}?kind={OK_KIND}&state=failed",
        "jobs, args search": f'{jobs}?args={{"n": 3}}',
        "jobs, error text": f"{jobs}?error=failure+7",
        # Content searches through the search indexes (migration 0024) with a state most of
        # their matches are not in: the page checks candidates until it fills or stops.
        "jobs, args search, state=failed": f'{jobs}?args={{"n": 3}}&state=failed',
        "jobs, error text, state=dlq": f"{jobs}?error=failure&state=dlq",
        "jobs, by id": f"{jobs}?job_id={middle_id}",
        "jobs, live refresh": f"{jobs}?state=running&live=1",
        "job page": f"{jobs}{middle_id}/",
        "dlq, first page": dlq,
        "dlq, older than 1 day": f"{dlq}?age=1d",
        "dlq, queue imports": f"{dlq}?queue=imports",
        "dlq, error type": f"{dlq}?error_type=builtins.KeyError",
        "dlq, error type prefix": f"{dlq}?error_type=keyerr",
        "dlq, reason": f"{dlq}?reason=moved_from_failed",
        "dlq, by error": f"{dlq}groups/",
        "dlq, entry page": f"{dlq}{dlq_id}/",
        "queue health": health,
        "queue health, live refresh": f"{health}?live=1",
        "cron": f"{health}cron/",
        "workflows": "/admin/awa_django/workflow/",
        "workflows, state=completed": "/admin/awa_django/workflow/?state=completed",
        "workflow page": f"/admin/awa_django/workflow/{workflow_id}/",
        "fleet, queues": "/admin/awa_django/queuedescriptor/",
        "fleet, kinds": "/admin/awa_django/kinddescriptor/",
        "fleet, workers": "/admin/awa_django/runtimeinstance/",
    }
    # Confirmation pages (a POST not yet confirmed: the count first) and the bulk walks
    # themselves (confirmed; rolled back after each repetition).
    matching = f"{jobs}act-matching/"
    dlq_matching = f"{dlq}act-matching/"
    posts: dict[str, tuple[str, dict[str, str]]] = {
        "confirm cancel, state=running": (matching, {"action": "cancel", "state": "running"}),
        "confirm cancel, state=available": (matching, {"action": "cancel", "state": "available"}),
        "confirm cancel, state=scheduled": (matching, {"action": "cancel", "state": "scheduled"}),
        "confirm retry, state=failed": (matching, {"action": "retry", "state": "failed"}),
        "confirm retry, state=cancelled": (matching, {"action": "retry", "state": "cancelled"}),
        "confirm cancel, undeclared queue": (
            matching,
            {"action": "cancel", "state": "available", "queue": "reports"},
        ),
        "confirm drain, undeclared queue": (
            f"{health}act/",
            {"action": "drain", "queue": "reports"},
        ),
        "dlq confirm retry, queue imports": (
            dlq_matching,
            {"action": "retry", "queue": "imports"},
        ),
        "dlq confirm purge, error type": (
            dlq_matching,
            {"action": "purge", "error_type": "builtins.KeyError"},
        ),
        "walk cancel, state=running": (
            matching,
            {"action": "cancel", "state": "running", "confirmed": "on"},
        ),
        "walk retry, state=failed": (
            matching,
            {"action": "retry", "state": "failed", "confirmed": "on"},
        ),
        "walk cancel, undeclared queue": (
            matching,
            {"action": "cancel", "state": "available", "queue": "reports", "confirmed": "on"},
        ),
        "walk dlq retry, reason": (
            dlq_matching,
            {"action": "retry", "reason": "attempts_exhausted", "age": "1d", "confirmed": "on"},
        ),
    }

    def timed(name: str, send: Callable[[], Any]) -> tuple[Any, list[dict[str, str]]]:
        """``send`` run ``--reps`` times, each in a transaction rolled back after it; prints
        the median and answers the last response and the statements it ran."""
        timings = []
        for _ in range(args.reps):
            with transaction.atomic(), CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                response = send()
                timings.append((time.perf_counter() - began) * 1000)
                transaction.set_rollback(True)
            assert response.status_code in (200, 302), (name, response.status_code)
        statements = list(queries.captured_queries)
        record = {
            "page": name,
            "median_ms": statistics.median(timings),
            "ms": timings,
            "queries": len(statements),
            "status": response.status_code,
        }
        if not args.no_plans:
            record["statements"] = plans(connection, statements)
        results["pages"].append(record)
        return response, statements

    results: dict[str, Any] = {
        "arguments": {key: value for key, value in vars(args).items() if key != "output"},
        "environment": environment.collect(),
        "totals": totals,
        "build_s": build_s,
        "pages": [],
        "listings": [],
    }
    missed = []
    print(f"{'page':40} {'median ms':>10} {'queries':>8} {'page 1 / in state':>18}")
    for name, url in pages.items():
        response, statements = timed(name, partial(client.get, url))
        found = ""
        state = name.removeprefix("jobs, state=") if name.startswith("jobs, state=") else None
        if state is not None:
            listed = [job for job in response.context["jobs"] if job.state == state]
            found = f"{len(listed)} / {totals[state]}"
            if len(listed) < min(totals[state], 50) or len(listed) != len(response.context["jobs"]):
                missed.append(name)
        median = results["pages"][-1]["median_ms"]
        print(f"{name:40} {median:10.1f} {len(statements):8} {found:>18}")
    for name, (url, data) in posts.items():
        response, statements = timed(name, partial(client.post, url, data))
        counted = ""
        if response.status_code == 200 and response.context is not None:
            counted = str(response.context.get("count", response.context.get("pending", "")))
        median = results["pages"][-1]["median_ms"]
        print(f"{name:40} {median:10.1f} {len(statements):8} {counted:>18}")

    # The public listing, and the same filter read through the view (how awa.list_jobs found a
    # page before it read the indexes): the ceiling is not the view but the page's own reads.
    calls = {
        "list_jobs()": {},
        **{f"list_jobs(state={state})": {"state": state} for state in JOB_STATES},
        "list_jobs(queue=email, state=running)": {"queue": "email", "state": "running"},
        "list_jobs(kind=ok, state=cancelled)": {"kind": OK_KIND, "state": "cancelled"},
        "list_jobs(kind=fails, state=failed)": {"kind": FAILS_KIND, "state": "failed"},
    }
    print(f"\n{'call':40} {'median ms':>10} {'view ms':>8} {'by id ms':>9}")
    for name, where in calls.items():
        listed_ms, view_ms, by_id_ms = [], [], []
        for _ in range(args.reps):
            began = time.perf_counter()
            listed = [job.job_id for job in awa.list_jobs(**where)]
            listed_ms.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            through_view = view_page(connection, where)
            view_ms.append((time.perf_counter() - began) * 1000)
            # The floor: the page's records read by their ids, which every listing ends with.
            began = time.perf_counter()
            awa.get_jobs(listed)
            by_id_ms.append((time.perf_counter() - began) * 1000)
        if listed != through_view:
            missed.append(name)
        results["listings"].append(
            {"call": name, "median_ms": statistics.median(listed_ms), "ms": listed_ms}
        )
        print(
            f"{name:40} {statistics.median(listed_ms):10.1f} {statistics.median(view_ms):8.1f} "
            f"{statistics.median(by_id_ms):9.1f}"
        )
    results["environment"]["machine"]["loadavg_at_end"] = list(os.getloadavg())
    RESULTS.mkdir(exist_ok=True)
    output = args.output or RESULTS / f"admin-pages-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    output.write_text(json.dumps(results, default=str))
    print(f"\nwrote {output}")
    flagged = [
        (page["page"], statement)
        for page in results["pages"]
        for statement in page.get("statements", [])
        if statement["flags"]
    ]
    if flagged:
        print("\nstatements whose plan grows with the history, or slow ones:")
    for page_name, statement in flagged:
        code = " ".join(
            line for line in statement["sql"].splitlines() if not line.lstrip().startswith("--")
        )
        print(f"- {page_name}: {', '.join(statement['flags'])}\n    {code[:160]}")
    if missed:
        sys.exit(f"state pages that missed jobs, or listings unlike the view: {missed}")


def jobs_page(reps: int) -> dict[str, dict[str, Any]]:
    """The Jobs page with the default filters and with state=completed, each rendered ``reps``
    times through Django's test client as a superuser: the median time, the queries and the
    count the page showed (the state's; none without a state)."""
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)
    user, _ = User.objects.get_or_create(username="bench-admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    timings: dict[str, dict[str, Any]] = {}
    for name, url in {
        "jobs": "/admin/awa_django/job/",
        "jobs, state=completed": "/admin/awa_django/job/?state=completed",
    }.items():
        ms = []
        for _ in range(reps):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                response = client.get(url)
                ms.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, (name, response.status_code)
        timings[name] = {
            "median_ms": statistics.median(ms),
            "ms": ms,
            "queries": len(queries.captured_queries),
            "count": response.context["state_count"],
        }
    return timings


# Statements an admin page runs that are not the page's reads: the session's own, Django's.
_NOT_READS = re.compile(r"^\s*(SAVEPOINT|RELEASE|ROLLBACK|BEGIN|COMMIT|SET\b)", re.IGNORECASE)
# A planner setting the page changed for the rest of its transaction (storage/browse.py:
# plan_without_jit, plan_as_walk and their restores), as the statement was sent.
_LOCAL_SETTING = re.compile(r"set_config\('(jit|enable_\w+)', '(\w+)', true\)")


def plans(connection: Any, statements: list[dict[str, str]]) -> list[dict[str, Any]]:
    """The executed plan of every awa statement a page ran (each run again under EXPLAIN
    ANALYZE in a transaction rolled back, with the planner settings the page had when it ran
    it), with what is wrong with it: a sequential scan of more than BIG_SCAN rows, a join
    filter discarding more than that (a join on part of its key), or more than 300 ms."""
    settings: dict[str, str] = {}
    seen: set[str] = set()
    answers = []
    for captured in statements:
        sql = captured["sql"]
        changed = dict(_LOCAL_SETTING.findall(sql))
        if changed or "set_config(" in sql:
            settings |= changed
            continue
        if "awa." not in sql or _NOT_READS.match(sql) or sql in seen:
            continue
        seen.add(sql)
        record: dict[str, Any] = {"sql": sql, "settings": dict(settings), "flags": []}
        answers.append(record)
        try:
            with transaction_rolled_back(connection), connection.cursor() as cursor:
                for name, value in settings.items():
                    cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}")
                (plan,) = cursor.fetchone()
        except Exception as error:  # a statement EXPLAIN cannot take is recorded as such
            record["error"] = str(error)
            continue
        if isinstance(plan, str):
            plan = json.loads(plan)
        top = plan[0]
        record["flags"] = list(plan_flags(top["Plan"]))
        if top["Execution Time"] > 300:
            record["flags"].append(f"{top['Execution Time']:.0f} ms")
        record["execution_ms"] = top["Execution Time"]
        record["plan"] = plan
    return answers


def transaction_rolled_back(connection: Any) -> Any:
    from contextlib import contextmanager

    from django.db import transaction

    @contextmanager
    def rolled_back() -> Iterator[None]:
        with transaction.atomic():
            yield
            transaction.set_rollback(True)

    return rolled_back()


def plan_flags(node: dict[str, Any]) -> Iterator[str]:
    """What in a plan node (and under it) reads the history whole."""
    loops = node.get("Actual Loops", 1)
    if node["Node Type"] == "Seq Scan":
        read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * loops
        if read > BIG_SCAN:
            yield f"Seq Scan on {node.get('Relation Name')} ({read:,.0f} rows)"
    removed = node.get("Rows Removed by Join Filter", 0) * loops
    if removed > BIG_SCAN:
        yield f"{node['Node Type']} filtering {removed:,.0f} rows"
    for child in node.get("Plans", []):
        yield from plan_flags(child)


def dead_letters(connection: Any, count: int) -> None:
    """``count`` DLQ entries of queue ``imports`` (undeclared). Half are failed in the ring
    (claimed, closed failed with an error) and moved to the DLQ as awa.dlq.move_failed moves them,
    a fifth of those then purged as awa.dlq.purge does (their failed closures stay in the ring,
    hidden by a marker in awa.purged_jobs); the other half are entries whose ring slot was
    pruned long ago, inserted directly, with errors in four groups."""
    through_ring = count // 2
    ids = history_fill.fill(
        through_ring,
        FAILS_KIND,
        queue="imports",
        failure=history_fill.Failure("builtins.LookupError", "order not found:"),
        max_attempts=1,
    )
    with connection.cursor() as cursor:
        for start in range(0, len(ids), 5_000):
            cursor.execute(
                "SELECT count(*) FROM awa.dlq_move(%s, ARRAY['failed'], 'moved_from_failed')",
                [ids[start : start + 5_000]],
            )
        purged = ids[::5]
        for start in range(0, len(purged), 5_000):
            cursor.execute(
                "SELECT count(*) FROM awa.dlq_purge(%s)", [purged[start : start + 5_000]]
            )
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt, "
            "original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason, "
            "dlq_at) SELECT nextval('awa.job_id_seq'), %s, 'default', 2, '{}', 1, 1, 1, now(), "
            "'{}', '{}', jsonb_build_array(jsonb_build_object('attempt', 1, 'at', now(), "
            "'type', (ARRAY['builtins.RuntimeError', 'builtins.KeyError', 'builtins.ValueError',"
            " 'builtins.TimeoutError'])[1 + n %% 4], 'message', 'bench failure ' || n, "
            "'traceback', '')), 'attempts_exhausted', now() - make_interval(secs => n) "
            "FROM generate_series(1, %s) n",
            [FAILS_KIND, count - through_ring],
        )


def cron_schedules(job: Any) -> None:
    """The CRON schedules stored as the leader syncs them, each triggered CRON_FIRES times (the
    burst worker then runs the fired jobs)."""
    import awa_django as awa
    from awa_django.declarations.cron import Declaration, declarations, declared_schedules
    from awa_django.storage.connections import connect
    from awa_django.storage.cron import sync_cron_jobs
    from awa_django.storage.statement import run_async

    for name, timetable in zip(CRON, ("* * * * *", "0 * * * *", "0 3 * * *"), strict=True):
        declarations.add(
            Declaration(origin="bench", name=name, schedule=timetable, job=job, args={"n": 0})
        )
    rows = [s.as_row() for s in declared_schedules() if s.name in CRON]

    async def sync() -> None:
        async with await connect("default") as conn:
            await run_async(conn, sync_cron_jobs(rows))

    asyncio.run(sync())
    for name in CRON:
        for _ in range(CRON_FIRES):
            awa.cron.trigger(name)


def view_page(connection: Any, where: dict[str, str]) -> list[int]:
    """The 50 newest ids of the filter, read through the ``awa.jobs`` view."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM awa.jobs WHERE (%(queue)s::text IS NULL OR queue = %(queue)s) "
            "AND (%(kind)s::text IS NULL OR kind = %(kind)s) "
            "AND (%(state)s::text IS NULL OR state = %(state)s) ORDER BY job_id DESC LIMIT 50",
            {"queue": None, "kind": None, "state": None, **where},
        )
        return [row[0] for row in cursor.fetchall()]


if __name__ == "__main__":
    main()
