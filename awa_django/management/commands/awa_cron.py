"""``manage.py awa_cron list|pause|resume|trigger|remove``: operate on stored cron schedules."""

from __future__ import annotations

import argparse
from typing import Any, Final

from django.core.management.base import CommandError

from awa_django.management.command import QueueCommand, add_database_argument, chosen_database
from awa_django.management.output import name as text
from awa_django.producer import cron

_PAST_TENSE: Final = {"pause": "paused", "resume": "resumed", "remove": "removed"}


class Command(QueueCommand):
    help = "List, pause, resume, trigger or remove awa cron schedules (every deployment's)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add_database_argument(actions.add_parser("list", help="Show every stored schedule."))
        for action, summary in (
            ("pause", "Stop a schedule from firing."),
            ("resume", "Let a paused schedule fire again from its next tick."),
            ("trigger", "Enqueue a schedule's job now, outside its timetable."),
            ("remove", "Delete a schedule (a deployment still declaring it re-creates it)."),
        ):
            sub = actions.add_parser(action, help=summary)
            sub.add_argument("name", type=text, metavar="NAME")
            add_database_argument(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        # A schedule lives in its queue's database (default: DATABASE_ALIAS).
        db = chosen_database(options)
        if action == "list":
            self._list(db)
            return
        name = options["name"]
        stored = sorted(schedule.name for schedule in cron.list(database=db))
        if name not in stored:
            raise CommandError(f"NAME: no cron schedule named {name!r} (stored: {stored})")
        if action == "trigger":
            job_id = cron.trigger(name, database=db)
            if job_id is None:
                raise CommandError(f"NAME: cron schedule {name!r} was removed meanwhile")
            self.stdout.write(f"enqueued job {job_id} for {name}")
            return
        act = {"pause": cron.pause, "resume": cron.resume, "remove": cron.remove}[action]
        done = act(name, database=db)
        if not done:
            # It exists (checked above): it is in the state already, or went meanwhile.
            state = {"pause": "already paused", "resume": "not paused", "remove": "gone"}
            raise CommandError(f"cron schedule {name!r} is {state[action]}")
        self.stdout.write(f"{_PAST_TENSE[action]} {name}")

    def _list(self, db: str) -> None:
        schedules = cron.list(database=db)
        if not schedules:
            self.stdout.write("no cron schedules")
            return
        for s in schedules:
            state = f"paused since {s.paused_at:%Y-%m-%d %H:%M:%S%z}" if s.paused_at else "active"
            last = s.last_fire_at.isoformat() if s.last_fire_at else "never"
            self.stdout.write(
                f"{s.name}\t{s.cron_expr} ({s.timezone})\t{s.kind} -> {s.queue}\t"
                f"{s.missed_fire_policy}\t{state}\tlast fire {last}"
            )
