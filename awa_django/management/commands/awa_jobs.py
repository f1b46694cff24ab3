"""``manage.py awa_jobs list|dump|retry|cancel``: look at and act on single jobs."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

import awa_django as awa
from awa_django.exceptions import InvalidJob
from awa_django.management.output import table, to_json


class Command(BaseCommand):
    help = (
        "List jobs (--queue/--kind/--state), dump one as JSON, retry a failed, cancelled or "
        "dead-lettered job, or cancel a job."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("list", "dump", "retry", "cancel"))
        parser.add_argument("job_ids", nargs="*", type=int, metavar="JOB_ID")
        parser.add_argument("--queue", help="list: only this queue.")
        parser.add_argument("--kind", help="list: only this job kind.")
        parser.add_argument(
            "--state", help="list: only this state (available, running, failed, dlq, ...)."
        )
        parser.add_argument("--limit", type=int, default=50, help="list: most jobs shown.")
        parser.add_argument("--json", action="store_true", help="list: print JSON.")
        parser.add_argument("--to-queue", help="retry: put the job on this queue.")
        parser.add_argument("--reason", default="cancelled by operator", help="cancel: reason.")

    def handle(self, *args: Any, **options: Any) -> None:
        action, ids = options["action"], options["job_ids"]
        if action != "list" and not ids:
            raise CommandError(f"{action} needs at least one JOB_ID")
        if action == "list":
            self._list(options)
        elif action == "dump":
            records = awa.get_jobs(ids)
            missing = sorted(set(ids) - {r.job_id for r in records})
            self.stdout.write(to_json(records))
            if missing:
                raise CommandError(f"no such job: {', '.join(map(str, missing))}")
        elif action == "retry":
            for job_id in ids:
                try:
                    ok = awa.retry(job_id, queue=options["to_queue"])
                except InvalidJob as exc:
                    raise CommandError(str(exc)) from None
                verdict = "retried" if ok else "not retryable (not failed, cancelled or dlq)"
                self.stdout.write(f"{job_id}: {verdict}")
        else:
            for job_id in ids:
                ok = awa.cancel(job_id, reason=options["reason"])
                self.stdout.write(f"{job_id}: {'cancelled' if ok else 'already finished'}")

    def _list(self, options: dict[str, Any]) -> None:
        records = awa.list_jobs(
            queue=options["queue"],
            kind=options["kind"],
            state=options["state"],
            limit=options["limit"],
        )
        if options["json"]:
            self.stdout.write(to_json(records))
            return
        rows = [
            (r.job_id, r.state, r.queue, r.kind, r.priority, f"{r.attempt}/{r.max_attempts}")
            for r in records
        ]
        self.stdout.write(table(("job_id", "state", "queue", "kind", "priority", "attempt"), rows))
