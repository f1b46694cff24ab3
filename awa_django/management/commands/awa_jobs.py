"""``manage.py awa_jobs list|dump|retry|cancel``: look at and act on single jobs."""

from __future__ import annotations

import argparse
from typing import Any, Final

from django.core.management.base import CommandError

from awa_django.conf import get_settings
from awa_django.core.unknown_kinds import waits_for_kind
from awa_django.declarations.priorities import shown_priority
from awa_django.management.command import QueueCommand, add_database_argument, chosen_database
from awa_django.management.output import job_id, name, row_limit, table, to_json
from awa_django.management.validation import (
    declared_queue,
    existing_jobs,
    known_kind,
    known_queue,
    refuse_unused,
)
from awa_django.ops.actions import cancel, retry
from awa_django.ops.records import get_jobs, list_jobs
from awa_django.producer.workflows import waiting_on
from awa_django.storage.browse import JOB_STATES

# The awa.jobs view also reports an attempt parked on a callback as its own state.
DEFAULT_LIMIT: Final = 50
DEFAULT_REASON: Final = "cancelled by operator"
# Each option that only some actions read: how it is typed, and those actions.
USES: Final = {
    "job_ids": ("JOB_ID", ("dump", "retry", "cancel")),
    "queue": ("--queue", ("list",)),
    "kind": ("--kind", ("list",)),
    "state": ("--state", ("list",)),
    "limit": ("--limit", ("list",)),
    "json": ("--json", ("list",)),
    "to_queue": ("--to-queue", ("retry",)),
    "reason": ("--reason", ("cancel",)),
}


class Command(QueueCommand):
    help = (
        "List jobs (--queue/--kind/--state), dump one as JSON, retry a failed, cancelled or "
        "dead-lettered job, or cancel a job."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("list", "dump", "retry", "cancel"))
        parser.add_argument("job_ids", nargs="*", type=job_id, metavar="JOB_ID")
        parser.add_argument("--queue", type=name, help="list: only this queue.")
        parser.add_argument("--kind", type=name, help="list: only this job kind.")
        parser.add_argument("--state", choices=JOB_STATES, help="list: only this state.")
        parser.add_argument(
            "--limit", type=row_limit, help=f"list: most jobs shown (default {DEFAULT_LIMIT})."
        )
        parser.add_argument("--json", action="store_true", help="list: print JSON.")
        add_database_argument(parser)
        parser.add_argument("--to-queue", type=name, help="retry: put the job on this queue.")
        parser.add_argument(
            "--reason", type=name, help=f"cancel: the reason (default {DEFAULT_REASON!r})."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        action, ids = options["action"], options["job_ids"]
        refuse_unused(options, action, USES)
        if action == "list":
            self._list(options)
            return
        if not ids:
            raise CommandError(f"{action} needs at least one JOB_ID")
        # Job ids count per database: the ids name jobs of this one.
        db = chosen_database(options)
        existing_jobs(ids, database=db)
        if action == "dump":
            self.stdout.write(to_json(get_jobs(ids, database=db)))
        elif action == "retry":
            declared_queue(options["to_queue"], option="--to-queue", database=db)
            for job in ids:
                ok = retry(job, queue=options["to_queue"], database=db)
                verdict = "retried" if ok else "not retryable (not failed, cancelled or dlq)"
                self.stdout.write(f"{job}: {verdict}")
        else:
            for job in ids:
                ok = cancel(job, reason=options["reason"] or DEFAULT_REASON, database=db)
                self.stdout.write(f"{job}: {'cancelled' if ok else 'already finished'}")

    def _list(self, options: dict[str, Any]) -> None:
        db = chosen_database(options, queue=options["queue"])
        known_queue(options["queue"], option="--queue", database=db)
        known_kind(options["kind"], option="--kind", database=db)
        records = list_jobs(
            queue=options["queue"],
            kind=options["kind"],
            state=options["state"],
            limit=options["limit"] or DEFAULT_LIMIT,
            database=db,
        )
        if options["json"]:
            self.stdout.write(to_json(records))
            return
        # A held workflow step says which steps it waits for (one query, for those only);
        # workflows live in DATABASE_ALIAS alone, where ids of another database mean nothing.
        held = [r.job_id for r in records if r.state == "held"]
        waiting = waiting_on(held) if db == get_settings().DATABASE_ALIAS else {}
        rows = [
            (
                r.job_id,
                f"{r.state} (no worker knows this kind)"
                if waits_for_kind(r.state, r.errors)
                else f"{r.state} ({waiting[r.job_id]})"
                if r.job_id in waiting
                else r.state,
                r.queue,
                r.kind,
                shown_priority(r.kind, r.priority, r.metadata),
                f"{r.attempt}/{r.max_attempts}",
            )
            for r in records
        ]
        self.stdout.write(table(("job_id", "state", "queue", "kind", "priority", "attempt"), rows))
