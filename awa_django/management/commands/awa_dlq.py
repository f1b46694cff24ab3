"""``manage.py awa_dlq list|depth|retry|purge|move-failed``: the dead-letter queue from the
shell (see ``awa_django.dlq``)."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from awa_django import dlq
from awa_django.exceptions import ConfirmationRequired, InvalidJob
from awa_django.management.output import seconds, table, to_json

ACTIONS = ("list", "depth", "retry", "purge", "move-failed")


class Command(BaseCommand):
    help = (
        "Inspect the dead-letter queue, retry or purge entries (by id, or in bulk with "
        "--queue/--kind/--reason/--older-than, or --all), or move failed jobs into it."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("job_ids", nargs="*", type=int, metavar="JOB_ID")
        parser.add_argument("--queue", help="Only entries of this queue.")
        parser.add_argument("--kind", help="Only entries of this job kind.")
        parser.add_argument(
            "--reason", help="Only entries with this reason (attempts_exhausted, ...)."
        )
        parser.add_argument(
            "--older-than",
            type=seconds,
            metavar="SECONDS",
            help="Only entries that entered the DLQ (for move-failed: that failed) longer ago.",
        )
        parser.add_argument(
            "--all", action="store_true", help="Allow a bulk retry/purge/move with no filter."
        )
        parser.add_argument("--to-queue", help="retry: put the jobs on this queue.")
        parser.add_argument("--priority", type=int, help="retry: with this priority (1..4).")
        parser.add_argument(
            "--run-in", type=seconds, metavar="SECONDS", help="retry: run this much later."
        )
        parser.add_argument("--limit", type=int, default=50, help="list: most entries shown.")
        parser.add_argument("--json", action="store_true", help="list/depth: print JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, "_" + options["action"].replace("-", "_"))(options)
        except (ConfirmationRequired, InvalidJob) as exc:
            raise CommandError(str(exc)) from None

    def _filters(self, options: dict[str, Any]) -> dict[str, Any]:
        return {
            "queue": options["queue"],
            "kind": options["kind"],
            "older_than": options["older_than"],
            "all": options["all"],
        }

    def _list(self, options: dict[str, Any]) -> None:
        entries = dlq.list(
            queue=options["queue"],
            kind=options["kind"],
            reason=options["reason"],
            older_than=options["older_than"],
            limit=options["limit"],
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
        depths = dlq.depths()
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
            for job_id in options["job_ids"]:
                ok = dlq.retry(job_id, queue=options["to_queue"], **move)
                self.stdout.write(f"{job_id}: {'retried' if ok else 'not in the DLQ'}")
            return
        count = dlq.retry_bulk(
            **self._filters(options), reason=options["reason"], to_queue=options["to_queue"], **move
        )
        self.stdout.write(f"retried {count} entries")

    def _purge(self, options: dict[str, Any]) -> None:
        if options["job_ids"]:
            for job_id in options["job_ids"]:
                ok = dlq.purge(job_id)
                self.stdout.write(f"{job_id}: {'purged' if ok else 'not in the DLQ'}")
            return
        count = dlq.purge_bulk(**self._filters(options), reason=options["reason"])
        self.stdout.write(f"purged {count} entries")

    def _move_failed(self, options: dict[str, Any]) -> None:
        if options["job_ids"]:
            count = dlq.move_failed(job_ids=options["job_ids"])
        else:
            count = dlq.move_failed(**self._filters(options))
        self.stdout.write(f"moved {count} failed jobs into the DLQ")
