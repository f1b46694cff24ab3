"""How long the admin's list pages take over a large queue, first page and deep pages.

Usage (it EMPTIES the awa tables of the database it runs on)::

    DATABASE_URL=postgres://... python -m benchmarks.admin_pages [--jobs 1000000] [--reps 5]

It loads ``--jobs`` available jobs (bulk COPY) and as many DLQ entries, then renders each page
through Django's test client as a superuser and prints the median time and query count of each.
The example project's settings are used because they install the admin.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    django.setup()

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from awa_django.enqueue import enqueue_many
    from awa_django.testing import reset_queue

    setup_test_environment()
    call_command("migrate", verbosity=0)
    reset_queue()
    started = time.perf_counter()
    for start in range(0, args.jobs, 50_000):
        count = min(50_000, args.jobs - start)
        enqueue_many("bench.noop", [{"n": n} for n in range(count)], queue="default")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt, "
            "original_run_lease, max_attempts, created_at, metadata, tags, errors, dlq_reason, "
            "dlq_at) SELECT nextval('awa.job_id_seq'), 'bench.fail', 'default', 2, '{}', 1, 1, "
            "1, now(), '{}', '{}', '[]', 'attempts_exhausted', now() - make_interval(secs => n) "
            "FROM generate_series(1, %s) n",
            [args.jobs],
        )
        cursor.execute("ANALYZE")
        cursor.execute("SELECT max(job_id) / 2 FROM awa.ready_entries")
        (middle_id,) = cursor.fetchone()
    print(
        f"loaded {args.jobs} jobs and {args.jobs} DLQ entries in "
        f"{time.perf_counter() - started:.0f} s"
    )

    user, _ = User.objects.get_or_create(username="bench-admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    pages = {
        "jobs, first page": "/admin/awa_django/job/",
        "jobs, middle page": f"/admin/awa_django/job/?before={middle_id}",
        "jobs, state=available": "/admin/awa_django/job/?state=available",
        "jobs, state=completed (none)": "/admin/awa_django/job/?state=completed",
        "jobs, state=running (none)": "/admin/awa_django/job/?state=running",
        "jobs, state=dlq": "/admin/awa_django/job/?state=dlq",
        "jobs, by id": f"/admin/awa_django/job/?job_id={middle_id}",
        "dlq, first page": "/admin/awa_django/deadletter/",
        "dlq, older than 1 day": "/admin/awa_django/deadletter/?age=1d",
        "dlq, queue=default": "/admin/awa_django/deadletter/?queue=default",
        "queue health": "/admin/awa_django/queue/",
    }
    print(f"{'page':32} {'median ms':>10} {'queries':>8}")
    for name, url in pages.items():
        timings = []
        for _ in range(args.reps):
            with CaptureQueriesContext(connection) as queries:
                began = time.perf_counter()
                response = client.get(url)
                timings.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        print(f"{name:32} {statistics.median(timings):10.1f} {len(queries.captured_queries):8}")


if __name__ == "__main__":
    main()
