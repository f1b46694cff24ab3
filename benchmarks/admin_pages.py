"""How long the admin's pages take over a history with jobs in every state, and whether each
state filter finds its jobs on page 1.

Usage (it EMPTIES the awa tables of the database it runs on)::

    DATABASE_URL=postgres://... python -m benchmarks.admin_pages [--jobs 50000] [--reps 5]
        [--hot-lane 28000]

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
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import timedelta
from typing import Any

import django

OK_KIND = "bench.admin_ok"
FAILS_KIND = "bench.admin_fails"
RARE = 50  # cancelled, failed and retryable jobs each
OPEN = 5  # running and waiting_external attempts each


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
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    django.setup()

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    import awa_django as awa
    from awa_django.conf import get_settings
    from awa_django.core.claimed_job import claimed_job_rows
    from awa_django.declarations.jobs import JobContext, registry
    from awa_django.storage.browse import JOB_STATES
    from awa_django.storage.connections import connect
    from awa_django.storage.queue import ClaimRequest, claim_ready
    from awa_django.storage.statement import run_async
    from awa_django.testing import reset_queue
    from awa_django.worker.process import WorkerProcess, config_from_settings

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

    setup_test_environment()
    call_command("migrate", verbosity=0)
    reset_queue()
    started = time.perf_counter()
    many = awa.enqueue_many
    # Open attempts first: claimed from their own queue, half of them parked on a callback.
    many(OK_KIND, [{"n": n} for n in range(2 * OPEN)], queue="email")
    claimed = asyncio.run(claim_open(2 * OPEN))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority,"
            " shard, lane_seq, claimed_by, callback_id, callback_timeout_at)"
            " SELECT job_id, run_lease, 0, ready_slot, queue, priority, shard, lane_seq,"
            " claimed_by, gen_random_uuid(), now() + interval '1 day'"
            " FROM awa.claim_receipts WHERE job_id = ANY(%s)",
            [claimed[:OPEN]],
        )
    for job_id in many(OK_KIND, [{"n": n} for n in range(RARE)], queue="default"):
        awa.cancel(job_id)
    many(FAILS_KIND, [{"n": n} for n in range(RARE)], queue="default", max_attempts=1)
    many(FAILS_KIND, [{"n": n} for n in range(RARE)], queue="default", max_attempts=5)
    burst()  # failed, and retryable (their retry is minutes away)
    tenth = args.jobs // 10
    many(OK_KIND, [{"n": n} for n in range(tenth)], run_at=timedelta(days=1))
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt, "
            "original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason, "
            "dlq_at) SELECT nextval('awa.job_id_seq'), %s, 'default', 2, '{}', 1, 1, "
            "1, now(), '{}', '{}', '[]', 'attempts_exhausted', now() - make_interval(secs => n) "
            "FROM generate_series(1, %s) n",
            [FAILS_KIND, tenth],
        )
    half = args.jobs // 2
    for start in range(0, half, 10_000):
        many(OK_KIND, [{"n": n} for n in range(min(10_000, half - start))])
    burst()
    if args.hot_lane:
        # Nothing else of queue default is available now, so the claim takes only these.
        many(OK_KIND, [{"n": n} for n in range(args.hot_lane)], queue="default")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM awa.claim_ready('default', %s, 'bench-hot', NULL, NULL,"
                " false)",
                [args.hot_lane],
            )
            cursor.execute(
                "SELECT count(*) FROM awa.close_batch((SELECT json_agg(json_build_object("
                "'ready_slot', c.ready_slot, 'queue', c.queue, 'priority', c.priority,"
                " 'shard', c.shard, 'lane_seq', c.lane_seq, 'job_id', c.job_id,"
                " 'run_lease', c.run_lease, 'outcome', 'completed'))"
                " FROM awa.claim_receipts c WHERE c.claimed_by = 'bench-hot'))"
            )
    rest = args.jobs - half - 2 * tenth - 3 * RARE - 2 * OPEN - args.hot_lane
    for start in range(0, rest, 10_000):
        many(OK_KIND, [{"n": n} for n in range(min(10_000, rest - start))])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("SELECT max(job_id) / 2 FROM awa.ready_entries")
        (middle_id,) = cursor.fetchone()
        # Every job's state through the view: a full read, done once here, never by a page.
        cursor.execute("SELECT state, count(*) FROM awa.jobs GROUP BY state")
        totals = {state: 0 for state in JOB_STATES} | dict(cursor.fetchall())
    print(f"built {sum(totals.values())} jobs in {time.perf_counter() - started:.0f} s: {totals}")

    user, _ = User.objects.get_or_create(username="bench-admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    jobs = "/admin/awa_django/job/"
    pages = {
        "jobs, first page": jobs,
        "jobs, middle page": f"{jobs}?before={middle_id}",
        **{f"jobs, state={state}": f"{jobs}?state={state}" for state in JOB_STATES},
        "jobs, kind prefix": f"{jobs}?kind=BENCH.ADMIN_F",
        "jobs, kind prefix, state=failed": f"{jobs}?kind=bench.admin_f&state=failed",
        # The 10 jobs of queue "email" are the oldest of the history.
        "jobs, rare queue prefix": f"{jobs}?queue=EMA",
        "jobs, rare queue, state=running": f"{jobs}?queue=email&state=running",
        # The common kind (nearly every job) in states it holds a few of, or none.
        "jobs, common kind, state=running": f"{jobs}?kind={OK_KIND}&state=running",
        "jobs, common kind, state=cancelled": f"{jobs}?kind={OK_KIND}&state=cancelled",
        "jobs, common kind, state=failed": f"{jobs}?kind={OK_KIND}&state=failed",
        "jobs, args search": f'{jobs}?args={{"n": 3}}',
        "jobs, error text": f"{jobs}?error=failure+7",
        "jobs, by id": f"{jobs}?job_id={middle_id}",
        "dlq, first page": "/admin/awa_django/deadletter/",
        "dlq, older than 1 day": "/admin/awa_django/deadletter/?age=1d",
        "dlq, by error": "/admin/awa_django/deadletter/groups/",
        "queue health": "/admin/awa_django/queue/",
    }
    missed = []
    print(f"{'page':34} {'median ms':>10} {'queries':>8} {'page 1 / in state':>18}")
    for name, url in pages.items():
        timings = []
        for _ in range(args.reps):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        found = ""
        state = name.removeprefix("jobs, state=") if name.startswith("jobs, state=") else None
        if state is not None:
            listed = [job for job in response.context["jobs"] if job.state == state]
            found = f"{len(listed)} / {totals[state]}"
            if len(listed) < min(totals[state], 50) or len(listed) != len(response.context["jobs"]):
                missed.append(name)
        print(
            f"{name:34} {statistics.median(timings):10.1f} "
            f"{len(queries.captured_queries):8} {found:>18}"
        )

    # The count a bulk action confirms first (a POST that is not yet confirmed).
    matching = "/admin/awa_django/job/act-matching/"
    for action, state in (("cancel", "running"), ("retry", "failed")):
        timings = []
        for _ in range(args.reps):
            began = time.perf_counter()
            response = client.post(matching, {"action": action, "state": state})
            timings.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 200, (state, response.status_code)
        name = f"confirm {action}, state={state}"
        counted = response.context["count"]
        print(f"{name:34} {statistics.median(timings):10.1f} {'':8} {counted:>18}")

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
        print(
            f"{name:40} {statistics.median(listed_ms):10.1f} {statistics.median(view_ms):8.1f} "
            f"{statistics.median(by_id_ms):9.1f}"
        )
    if missed:
        sys.exit(f"state pages that missed jobs, or listings unlike the view: {missed}")


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
