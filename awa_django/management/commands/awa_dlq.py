"""``manage.py awa_dlq list|depth|retry|purge|move-failed``: the dead-letter queue from the
shell (see ``awa_django.ops.dlq``)."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any, Final

from django.core.management.base import CommandError

from awa_django.conf import PRIORITY_MAX, PRIORITY_MIN
from awa_django.management.command import QueueCommand, add_database_argument, chosen_database
from awa_django.management.output import (
    ProgressLine,
    job_id,
    name,
    row_limit,
    seconds,
    table,
    to_json,
)
from awa_django.management.validation import (
    declared_queue,
    existing_jobs,
    known_kind,
    known_queue,
    refuse_unused,
)
from awa_django.ops import dlq

ACTIONS = ("list", "depth", "retry", "purge", "move-failed")
BULK: Final = ("retry", "purge", "move-failed")
DEFAULT_LIMIT: Final = 50
# Each option that only some actions read: how it is typed, and those actions.
USES: Final = {
    "job_ids": ("JOB_ID", BULK),
    "queue": ("--queue", ("list", "depth", *BULK)),
    "kind": ("--kind", ("list", *BULK)),
    "reason": ("--reason", ("list", "retry", "purge")),
    "older_than": ("--older-than", ("list", *BULK)),
    "all": ("--all", BULK),
    "to_queue": ("--to-queue", ("retry",)),
    "priority": ("--priority", ("retry",)),
    "run_in": ("--run-in", ("retry",)),
    "limit": ("--limit", ("list",)),
    "json": ("--json", ("list", "depth")),
}
# The options that select the entries of a bulk action (dest: as typed).
FILTERS: Final = {
    "queue": "--queue",
    "kind": "--kind",
    "reason": "--reason",
    "older_than": "--older-than",
}


class Command(QueueCommand):
    help = (
        "Inspect the dead-letter queue, retry or purge entries (by id, or in bulk with "
        "--queue/--kind/--reason/--older-than, or --all), or move failed jobs into it."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("job_ids", nargs="*", type=job_id, metavar="JOB_ID")
        parser.add_argument("--queue", type=name, help="Only entries of this queue.")
        parser.add_argument("--kind", type=name, help="Only entries of this job kind.")
        parser.add_argument("--reason", choices=dlq.REASONS, help="Only entries with this reason.")
        parser.add_argument(
            "--older-than",
            type=seconds,
            metavar="SECONDS",
            help="Only entries that entered the DLQ (for move-failed: that failed) longer ago.",
        )
        parser.add_argument(
            "--all", action="store_true", help="Allow a bulk retry/purge/move with no filter."
        )
        parser.add_argument("--to-queue", type=name, help="retry: put the jobs on this queue.")
        parser.add_argument(
            "--priority",
            type=int,
            choices=range(PRIORITY_MIN, PRIORITY_MAX + 1),
            help=f"retry: with this priority ({PRIORITY_MIN}..{PRIORITY_MAX}).",
        )
        parser.add_argument(
            "--run-in", type=seconds, metavar="SECONDS", help="retry: run this much later."
        )
        parser.add_argument(
            "--limit", type=row_limit, help=f"list: most entries shown (default {DEFAULT_LIMIT})."
        )
        parser.add_argument("--json", action="store_true", help="list/depth: print JSON.")
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        refuse_unused(options, action, USES)
        # The database acted on: --database, else --queue's, else DATABASE_ALIAS (depth with
        # neither adds up every database holding queues).
        options["db"] = chosen_database(options, queue=options["queue"])
        known_queue(options["queue"], option="--queue", database=options["db"])
        known_kind(options["kind"], option="--kind", database=options["db"])
        declared_queue(options["to_queue"], option="--to-queue", database=options["db"])
        if action in BULK:
            self._check_selection(action, options)
        getattr(self, "_" + action.replace("-", "_"))(options)

    def _check_selection(self, action: str, options: dict[str, Any]) -> None:
        """A bulk action takes JOB_IDs, or filters, or --all: never ids and filters at once."""
        given = [typed for dest, typed in FILTERS.items() if options[dest] is not None]
        if options["job_ids"]:
            if given or options["all"]:
                also = " (to put the jobs on another queue, use --to-queue)" if given else ""
                raise CommandError(
                    f"{(given or ['--all'])[0]} selects the entries of a bulk {action} and "
                    f"cannot be combined with JOB_ID{also}"
                )
            existing_jobs(options["job_ids"], database=options["db"])
        elif not given and not options["all"]:
            usable = [typed for dest, typed in FILTERS.items() if action in USES[dest][1]]
            raise CommandError(
                f"{action} needs JOB_IDs, a filter ({', '.join(usable)}) or --all; nothing was done"
            )

    def _filters(self, options: dict[str, Any]) -> dict[str, Any]:
        return {
            "queue": options["queue"],
            "kind": options["kind"],
            "older_than": options["older_than"],
            "all": options["all"],
            "database": options["db"],
        }

    def _list(self, options: dict[str, Any]) -> None:
        entries = dlq.list(
            queue=options["queue"],
            kind=options["kind"],
            reason=options["reason"],
            older_than=options["older_than"],
            limit=options["limit"] or DEFAULT_LIMIT,
            database=options["db"],
        )
        if options["json"]:
            self.stdout.write(to_json(entries))
            return
        rows = [
            (
                e.job_id,
                e.queue,
                e.kind,
                e.dlq_reason,
                e.attempt,
                e.dlq_at.isoformat(timespec="seconds"),
                (e.errors[-1].get("message", "") if e.errors else "")[:60],
            )
            for e in entries
        ]
        headers = ("job_id", "queue", "kind", "reason", "attempt", "dlq_at", "last_error")
        self.stdout.write(table(headers, rows))

    def _depth(self, options: dict[str, Any]) -> None:
        every = options["database"] is None and options["queue"] is None
        depths = dlq.depths(database=None if every else options["db"])
        if options["queue"]:
            depths = {options["queue"]: depths.get(options["queue"], 0)}
        if options["json"]:
            self.stdout.write(to_json(depths))
            return
        self.stdout.write(table(("queue", "depth"), sorted(depths.items())))
        self.stdout.write(f"total {sum(depths.values())}")

    def _retry(self, options: dict[str, Any]) -> None:
        run_at = None if options["run_in"] is None else timedelta(seconds=options["run_in"])
        move = {"run_at": run_at, "priority": options["priority"]}
        if options["job_ids"]:
            for job in options["job_ids"]:
                ok = dlq.retry(job, queue=options["to_queue"], database=options["db"], **move)
                self.stdout.write(f"{job}: {'retried' if ok else 'not in the DLQ'}")
            return
        progress = ProgressLine(self.stdout, "retried {} entries so far")
        count = dlq.retry_bulk(
            **self._filters(options),
            reason=options["reason"],
            to_queue=options["to_queue"],
            progress=progress,
            **move,
        )
        progress.finish(f"retried {count} entries")

    def _purge(self, options: dict[str, Any]) -> None:
        if options["job_ids"]:
            for job in options["job_ids"]:
                ok = dlq.purge(job, database=options["db"])
                self.stdout.write(f"{job}: {'purged' if ok else 'not in the DLQ'}")
            return
        progress = ProgressLine(self.stdout, "purged {} entries so far")
        count = dlq.purge_bulk(
            **self._filters(options), reason=options["reason"], progress=progress
        )
        progress.finish(f"purged {count} entries")

    def _move_failed(self, options: dict[str, Any]) -> None:
        if options["job_ids"]:
            count = dlq.move_failed(job_ids=options["job_ids"], database=options["db"])
            self.stdout.write(f"moved {count} failed jobs into the DLQ")
            return
        progress = ProgressLine(self.stdout, "moved {} failed jobs into the DLQ so far")
        count = dlq.move_failed(**self._filters(options), progress=progress)
        progress.finish(f"moved {count} failed jobs into the DLQ")
