"""``manage.py awa_queues``: per-queue health as a table, or JSON with ``--json``."""

from __future__ import annotations

import argparse
from typing import Any

from awa_django.conf import get_settings
from awa_django.management.command import QueueCommand, add_database_argument, chosen_database
from awa_django.management.output import table, to_json
from awa_django.ops import queues

HEADERS = (
    "queue",
    "available",
    "scheduled",
    "retryable",
    "unknown_kind",
    "running",
    "waiting",
    "dlq",
    "lag_s",
    "done/h",
    "failed/h",
    "per_min",
    "paused",
    "live_concurrency",
)


class Command(QueueCommand):
    help = (
        "Show every queue's depth by state, DLQ depth, lag, completed and failed in the last "
        "hour, throughput, pause state and the concurrency an operator set live (awa_queue "
        "concurrency), and the jobs that wait because no worker knows their kind; every "
        "database holding queues, or --database."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        # Every database holding queues unless --database names one.
        database = options["database"] and chosen_database(options)
        found = queues.stats(database=database)
        if options["json"]:
            self.stdout.write(to_json(found))
            return
        rows: list[tuple[object, ...]] = [
            (
                q.queue,
                q.available,
                q.scheduled,
                q.retryable,
                sum(q.unknown_kinds.values()),
                q.running,
                q.waiting_external,
                q.dlq,
                f"{q.lag_s:.1f}",
                q.completed_last_hour,
                q.failed_last_hour,
                f"{q.throughput_per_min:.1f}",
                f"yes ({q.paused_by})" if q.paused else "no",
                "-" if q.concurrency is None else f"{q.concurrency} ({q.concurrency_set_by})",
            )
            for q in found
        ]
        if len(get_settings().databases) > 1:
            # Queues in several databases: say where each lives.
            headers: tuple[str, ...] = (HEADERS[0], "database", *HEADERS[1:])
            rows = [(row[0], q.database, *row[1:]) for row, q in zip(rows, found, strict=True)]
        else:
            headers = HEADERS
        self.stdout.write(table(headers, rows))
        for q in found:
            for kind, count in q.unknown_kinds.items():
                self.stdout.write(
                    f"{q.queue}: {count} {kind} job(s) wait for a worker that knows their "
                    "kind: no worker that claimed them has its handler (import its module in "
                    "the workers: an installed app's jobs.py, or AWA['JOB_MODULES'])"
                )
