"""``manage.py awa_queue pause|resume|drain|concurrency QUEUE``: control one queue."""

from __future__ import annotations

import argparse
from typing import Any, Final

from django.core.management.base import CommandError

from awa_django.exceptions import InvalidJob
from awa_django.management.command import QueueCommand, add_database_argument, chosen_database
from awa_django.management.output import name
from awa_django.management.validation import known_queue, refuse_unused
from awa_django.ops import queues

DEFAULT_BY: Final = "operator"
# Each option that only some actions read: how it is typed, and those actions.
USES: Final = {
    "yes": ("--yes", ("drain",)),
    "by": ("--by", ("pause", "concurrency")),
    "to": ("--to", ("concurrency",)),
    "reset": ("--reset", ("concurrency",)),
}


class Command(QueueCommand):
    help = (
        "Pause or resume a queue, drain it (cancel every pending job; asks for confirmation "
        "unless --yes), or change its concurrency in every running worker (concurrency --to N, "
        "or --reset to the configured value). The queue may be one AWA['QUEUES'] declares or "
        "one the database holds."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("pause", "resume", "drain", "concurrency"))
        parser.add_argument("queue", type=name, metavar="QUEUE")
        parser.add_argument("--yes", action="store_true", help="drain: without asking.")
        add_database_argument(parser)
        parser.add_argument(
            "--by",
            type=name,
            help=f"pause, concurrency: who acts, stored with it (default {DEFAULT_BY!r}).",
        )
        parser.add_argument(
            "--to",
            type=int,
            metavar="N",
            help="concurrency: run at most N jobs of the queue at once in each worker process.",
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="concurrency: back to each worker's configured value.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue, action = options["queue"], options["action"]
        refuse_unused(options, action, USES)
        db = chosen_database(options, queue=queue)
        known_queue(queue, option="QUEUE", database=db)
        if action == "pause":
            queues.pause(queue, by=options["by"] or DEFAULT_BY, database=db)
            self.stdout.write(f"paused {queue}")
        elif action == "resume":
            queues.resume(queue, database=db)
            self.stdout.write(f"resumed {queue}")
        elif action == "concurrency":
            self._concurrency(queue, db, options["to"], reset=options["reset"], by=options["by"])
        else:
            self._drain(queue, db, confirmed=options["yes"])

    def _concurrency(
        self, queue: str, db: str, to: int | None, *, reset: bool, by: str | None
    ) -> None:
        if (to is None) == (not reset):
            raise CommandError("concurrency: give exactly one of --to N and --reset")
        if reset:
            queues.reset_concurrency(queue, by=by or DEFAULT_BY, database=db)
            self.stdout.write(f"{queue}: concurrency back to each worker's configured value")
            return
        assert to is not None
        try:
            queues.set_concurrency(queue, to, by=by or DEFAULT_BY, database=db)
        except InvalidJob as error:
            raise CommandError(f"--to: {error}; nothing was changed") from None
        self.stdout.write(f"{queue}: concurrency {to} in each worker process")

    def _drain(self, queue: str, db: str, *, confirmed: bool) -> None:
        if not confirmed:
            found = queues.stats(database=db)
            pending = next((q.pending for q in found if q.queue == queue), 0)
            try:
                answer = input(f"Cancel all {pending} pending jobs of {queue!r}? Type 'yes': ")
            except EOFError:
                answer = ""
            if answer.strip().lower() != "yes":
                raise CommandError(f"drain of {queue!r} aborted: nothing was cancelled")
        cancelled = queues.drain(queue, confirm=True, database=db)
        self.stdout.write(f"drained {queue}: cancelled {cancelled} pending jobs")
