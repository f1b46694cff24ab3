"""``manage.py awa_queue pause|resume|drain QUEUE``: control one queue."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from awa_django import queues
from awa_django.exceptions import InvalidJob


class Command(BaseCommand):
    help = (
        "Pause or resume a queue, or drain it (cancel every pending job; asks for confirmation "
        "unless --yes)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("pause", "resume", "drain"))
        parser.add_argument("queue")
        parser.add_argument("--yes", action="store_true", help="Drain without asking.")
        parser.add_argument("--by", default="operator", help="Who pauses (stored with the pause).")

    def handle(self, *args: Any, **options: Any) -> None:
        queue, action = options["queue"], options["action"]
        try:
            if action == "pause":
                queues.pause(queue, by=options["by"])
                self.stdout.write(f"paused {queue}")
            elif action == "resume":
                queues.resume(queue)
                self.stdout.write(f"resumed {queue}")
            else:
                self._drain(queue, confirmed=options["yes"])
        except InvalidJob as exc:
            raise CommandError(str(exc)) from None

    def _drain(self, queue: str, *, confirmed: bool) -> None:
        if not confirmed:
            pending = next((q.pending for q in queues.stats() if q.queue == queue), 0)
            try:
                answer = input(f"Cancel all {pending} pending jobs of {queue!r}? Type 'yes': ")
            except EOFError:
                answer = ""
            if answer.strip().lower() != "yes":
                raise CommandError(f"drain of {queue!r} aborted: nothing was cancelled")
        cancelled = queues.drain(queue, confirm=True)
        self.stdout.write(f"drained {queue}: cancelled {cancelled} pending jobs")
