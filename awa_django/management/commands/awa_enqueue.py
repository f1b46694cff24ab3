"""``manage.py awa_enqueue KIND``: enqueue one job from the shell and print its id.

Every value goes to ``awa.enqueue`` as given, which validates it exactly as it validates a call
from code; this command only turns the typed text into Python values (JSON, a date, seconds).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Final

from django.core.management.base import CommandError
from django.utils import timezone

from awa_django.declarations.unique import ON_CONFLICT_CHOICES, Unique
from awa_django.exceptions import InvalidJob, JobFailed, UniqueConflict, WaitTimeout
from awa_django.management.command import QueueCommand
from awa_django.management.output import name, seconds
from awa_django.ops.job_waits import wait
from awa_django.producer.enqueue import enqueue


def whole_number(value: str) -> int:
    """A whole number; its range is left to ``awa.enqueue``."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None


def json_value(value: str) -> Any:
    """Text parsed as JSON; what it must be (an object, ...) is left to ``awa.enqueue``."""
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {value!r}") from None


def iso_datetime(value: str) -> datetime:
    """An ISO 8601 date and time; one without an offset is taken in the current time zone."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO 8601 date and time (2026-12-24T18:00:00+01:00)"
        ) from None
    if timezone.is_naive(parsed):
        # A shell has no aware datetimes to offer, so TIME_ZONE is the only reading a person
        # typing a wall-clock time can mean (awa.enqueue refuses naive ones from code).
        return timezone.make_aware(parsed)
    return parsed


# The option that carries each value awa.enqueue names in an InvalidJob (its ``field`` up to
# the first "." or "[": "args.items[2]" is part of --args).
OPTIONS: Final = {
    "kind": "KIND",
    "args": "--args",
    "queue": "--queue",
    "priority": "--priority",
    "run_at": "--run-at/--delay",
    "max_attempts": "--max-attempts",
    "metadata": "--metadata",
    "tags": "--tag",
    "ordering_key": "--ordering-key",
    "unique": "--unique",
}
# The options whose text is turned into a value in ``handle`` rather than by argparse, so that
# bad text is one line on stderr naming the option (argparse prints its usage first): dest,
# the option as typed, and the conversion.
CONVERSIONS: Final[dict[str, tuple[str, Callable[[str], object]]]] = {
    "job_args": ("--args", json_value),
    "metadata": ("--metadata", json_value),
    "priority": ("--priority", whole_number),
    "max_attempts": ("--max-attempts", whole_number),
    "run_at": ("--run-at", iso_datetime),
    "delay": ("--delay", seconds),
    "wait": ("--wait", seconds),
    "unique_period": ("--unique-period", seconds),
}
# Exit status when a unique job's key is already held (bad input exits 1, usage errors 2), so
# a script can tell "already enqueued" from a mistake.
UNIQUE_CONFLICT_EXIT: Final = 3
# Exit statuses of --wait: the job ended without completing, or had not ended in time.
JOB_FAILED_EXIT: Final = 4
WAIT_TIMEOUT_EXIT: Final = 5


def refusal(exc: InvalidJob) -> str:
    """``awa.enqueue``'s message, after the option that carries the value it names."""
    top = re.split(r"[.\[]", exc.field or "", maxsplit=1)[0]
    option = OPTIONS.get(top)
    return f"{option}: {exc}" if option else str(exc)


class Command(QueueCommand):
    help = (
        "Enqueue one job of an awa job kind (as awa.enqueue does, with the same validation) "
        "and print its id."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("kind", type=name, metavar="KIND", help="The job kind (shop.charge).")
        parser.add_argument(
            "--args",
            # Not "args": Django passes the command's positional arguments as ``args``.
            dest="job_args",
            metavar="JSON",
            help='The arguments, a JSON object of name to value ({"user_id": 7}).',
        )
        parser.add_argument("--queue", type=name, help="Override the job's queue.")
        parser.add_argument("--priority", help="Override the job's priority.")
        when = parser.add_mutually_exclusive_group()
        when.add_argument(
            "--run-at",
            metavar="ISO8601",
            help="Run at this time (without an offset: in TIME_ZONE).",
        )
        when.add_argument("--delay", metavar="SECONDS", help="Run this many seconds from now.")
        parser.add_argument("--max-attempts", help="Override the job's max_attempts.")
        parser.add_argument("--metadata", metavar="JSON", help="Metadata, a JSON object.")
        parser.add_argument(
            "--tag", dest="tags", action="append", type=name, help="A tag (repeatable)."
        )
        parser.add_argument(
            "--ordering-key",
            type=name,
            metavar="KEY",
            help="Jobs with the same key are claimed in enqueue order on a sharded queue.",
        )
        parser.add_argument(
            "--unique",
            action="store_true",
            help="Deduplicate by all arguments (awa.Unique()); the --unique-* options imply it.",
        )
        parser.add_argument(
            "--unique-by",
            action="append",
            type=name,
            metavar="ARG",
            help="Deduplicate by this argument only (repeatable).",
        )
        parser.add_argument(
            "--unique-by-queue", action="store_true", help="Jobs on other queues are distinct."
        )
        parser.add_argument(
            "--unique-period",
            metavar="SECONDS",
            help="One job per period of this many seconds.",
        )
        parser.add_argument(
            "--unique-states",
            action="append",
            type=name,
            metavar="STATE",
            help="A state in which the holder blocks a duplicate (repeatable).",
        )
        parser.add_argument(
            "--on-conflict",
            choices=ON_CONFLICT_CHOICES,
            default="raise",
            help=f"When the unique key is held: raise (exit {UNIQUE_CONFLICT_EXIT}, the default) "
            "or return (print the holder's id, exit 0).",
        )

        parser.add_argument(
            "--wait",
            metavar="SECONDS",
            help="After printing the id, wait this long for the job to end and print its "
            f"result as JSON; exit {JOB_FAILED_EXIT} if it failed, was cancelled or "
            f"dead-lettered, {WAIT_TIMEOUT_EXIT} if it had not ended in time.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        kind = options["kind"]
        for dest, (typed, convert) in CONVERSIONS.items():
            # call_command may pass values already converted.
            if isinstance(options[dest], str):
                try:
                    options[dest] = convert(options[dest])
                except argparse.ArgumentTypeError as exc:
                    raise CommandError(f"{typed}: {exc}") from None
        delay = options["delay"]
        try:
            job_id = enqueue(
                kind,
                args=options["job_args"],
                queue=options["queue"],
                priority=options["priority"],
                run_at=options["run_at"] if delay is None else timedelta(seconds=delay),
                max_attempts=options["max_attempts"],
                metadata=options["metadata"],
                tags=options["tags"],
                unique=self._unique(options),
                on_conflict=options["on_conflict"],
                ordering_key=options["ordering_key"],
            )
        except InvalidJob as exc:
            raise CommandError(refusal(exc)) from None
        except UniqueConflict as exc:
            raise CommandError(
                f"not enqueued: a {kind!r} job with the same unique key is already enqueued "
                f"(job {exc.job_id}); --on-conflict return prints its id instead",
                returncode=UNIQUE_CONFLICT_EXIT,
            ) from None
        self.stdout.write(str(job_id))
        if options["wait"] is not None:
            self._wait(job_id, options["wait"])

    def _wait(self, job_id: int, timeout: float) -> None:
        # The id is out first, so a script that gives up waiting still knows the job.
        self.stdout.flush()
        try:
            record = wait(job_id, timeout=timeout)
        except JobFailed as exc:
            raise CommandError(str(exc), returncode=JOB_FAILED_EXIT) from None
        except WaitTimeout as exc:
            raise CommandError(str(exc), returncode=WAIT_TIMEOUT_EXIT) from None
        self.stdout.write(json.dumps(record.result))

    def _unique(self, options: dict[str, Any]) -> Unique | None:
        """The ``awa.Unique`` the options ask for; None leaves the job's own (if any)."""
        chosen: dict[str, Any] = {}
        if options["unique_by"]:
            chosen["by_args"] = options["unique_by"]
        if options["unique_by_queue"]:
            chosen["by_queue"] = True
        if options["unique_period"] is not None:
            chosen["period"] = timedelta(seconds=options["unique_period"])
        if options["unique_states"]:
            chosen["states"] = options["unique_states"]
        if not chosen and not options["unique"]:
            return None
        # Unique validates its own fields (InvalidJob naming "unique"), as for a call from code.
        try:
            return Unique(**chosen)
        except InvalidJob as exc:
            raise CommandError(refusal(exc)) from None
