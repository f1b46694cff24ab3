"""Cron expressions: validation and the ticks a schedule owes, computed by croniter.

Five fields (minute hour day month weekday) or six with seconds first
(second minute hour day month weekday), plus croniter's ``@hourly``-style aliases. Ticks are
computed in the schedule's IANA timezone (``zoneinfo``), so "9:00 every day" stays at 9:00 local
time across daylight saving changes. Values out of a field's range are refused (by croniter),
and so are steps longer than the field (``*/61`` in the minute field), which croniter would
read as the field's first value.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from awa_django.exceptions import InvalidSchedule

EXPRESSION_CHECK: Final = "awa.E030"
TIMEZONE_CHECK: Final = "awa.E031"
# Each field's name and how many values it spans, in five-field order; six fields put seconds
# first. A step longer than its field's span is refused: croniter reads "*/61" in the minute
# field as "minute 0", so a schedule meant to run every 61 minutes would run hourly.
FIELD_SPANS: Final = (("minute", 60), ("hour", 24), ("day", 31), ("month", 12), ("weekday", 7))
SECOND_SPAN: Final = ("second", 60)


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A validated expression in a timezone. Construction raises ``InvalidSchedule``."""

    expr: str
    timezone: str

    def __post_init__(self) -> None:
        if not isinstance(self.expr, str) or not self.expr.strip():
            raise InvalidSchedule(
                f"cron expression must be a non-empty string, got {self.expr!r}",
                check_id=EXPRESSION_CHECK,
            )
        fields = self.expr.split()
        if not fields[0].startswith("@") and len(fields) not in (5, 6):
            raise InvalidSchedule(
                f"cron expression {self.expr!r} has {len(fields)} fields; use 5 "
                "(minute hour day month weekday) or 6 with seconds first",
                check_id=EXPRESSION_CHECK,
            )
        if not fields[0].startswith("@"):
            self._check_steps(fields)
        zone = self.zone  # raises for an unknown timezone
        try:
            # One step proves the expression can match at all ("0 0 30 2 *" never does).
            self._iterator(datetime.now(zone)).get_next(datetime)
        except (CroniterError, ValueError, KeyError) as exc:
            raise InvalidSchedule(
                f"cron expression {self.expr!r} is invalid: {exc}", check_id=EXPRESSION_CHECK
            ) from None

    def _check_steps(self, fields: list[str]) -> None:
        spans = (SECOND_SPAN, *FIELD_SPANS) if len(fields) == 6 else FIELD_SPANS
        for text, (name, span) in zip(fields, spans, strict=True):
            for part in text.split(","):
                _, slash, step = part.partition("/")
                if slash and step.isdigit() and int(step) > span:
                    raise InvalidSchedule(
                        f"cron expression {self.expr!r} steps its {name} field by {step}, "
                        f"more than the {span} values that field has: it would only ever match "
                        "the first one",
                        check_id=EXPRESSION_CHECK,
                    )

    @property
    def zone(self) -> ZoneInfo:
        if not isinstance(self.timezone, str) or not self.timezone:
            raise InvalidSchedule(
                f"timezone must be an IANA name, got {self.timezone!r}", check_id=TIMEZONE_CHECK
            )
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidSchedule(
                f"timezone {self.timezone!r} is not a known IANA timezone (e.g. 'Europe/Paris')",
                check_id=TIMEZONE_CHECK,
            ) from None

    def _iterator(self, start: datetime) -> croniter:
        return croniter(self.expr, start, second_at_beginning=len(self.expr.split()) == 6)

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``, in the schedule's timezone."""
        next_at: datetime = self._iterator(after.astimezone(self.zone)).get_next(datetime)
        return next_at

    def ticks_between(self, after: datetime, until: datetime, *, limit: int) -> list[datetime]:
        """The newest ``limit`` ticks in ``(after, until)``, oldest first.

        Walks backwards from ``until``, so the cost is bounded by ``limit`` however long the
        schedule went unevaluated. A tick exactly at ``until`` is not due yet: it is returned by
        the next evaluation.
        """
        found: list[datetime] = []
        iterator = self._iterator(until.astimezone(self.zone))
        while len(found) < limit:
            tick = iterator.get_prev(datetime)
            if tick <= after:
                break
            found.append(tick)
        found.reverse()
        return found
