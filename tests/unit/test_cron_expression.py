"""Cron expressions and due-tick computation, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from awa_django.declarations.cron_expression import CronExpression
from awa_django.exceptions import InvalidSchedule
from awa_django.maintenance.cron_evaluator import due_ticks
from awa_django.storage.cron import DueSchedule

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


def schedule(expr: str, *, policy: str = "coalesce", last=None, resumed=None, now=None, tz="UTC"):
    return DueSchedule(
        name="s",
        cron_expr=expr,
        timezone=tz,
        missed_fire_policy=policy,
        last_fire_at=last,
        resumed_at=resumed,
        created_at=T0,
        db_now=now or T0 + timedelta(minutes=17, seconds=30),
    )


def test_five_field_ticks_are_the_newest_first_returned_oldest_first():
    ticks = CronExpression("*/5 * * * *", "UTC").ticks_between(
        T0, T0 + timedelta(minutes=17), limit=10
    )
    assert ticks == [T0 + timedelta(minutes=m) for m in (5, 10, 15)]


def test_limit_keeps_the_newest_ticks():
    ticks = CronExpression("* * * * *", "UTC").ticks_between(T0, T0 + timedelta(hours=5), limit=2)
    assert ticks == [T0 + timedelta(hours=5, minutes=-2), T0 + timedelta(hours=5, minutes=-1)]


def test_six_fields_put_seconds_first():
    ticks = CronExpression("*/20 * * * * *", "UTC").ticks_between(
        T0, T0 + timedelta(minutes=1, seconds=1), limit=10
    )
    assert ticks == [T0 + timedelta(seconds=s) for s in (20, 40, 60)]


def test_a_tick_at_the_upper_bound_is_not_due_yet():
    assert (
        CronExpression("0 * * * *", "UTC").ticks_between(T0, T0 + timedelta(hours=1), limit=5) == []
    )


def test_timezone_keeps_local_wall_clock_across_dst():
    paris = ZoneInfo("Europe/Paris")
    expression = CronExpression("0 9 * * *", "Europe/Paris")
    # 2026-03-29 is the spring-forward day in Europe.
    ticks = expression.ticks_between(
        datetime(2026, 3, 27, 12, tzinfo=UTC), datetime(2026, 3, 31, 12, tzinfo=UTC), limit=10
    )
    assert [t.astimezone(paris).hour for t in ticks] == [9, 9, 9, 9]
    assert [t.astimezone(UTC).hour for t in ticks] == [8, 7, 7, 7]


@pytest.mark.parametrize(
    ("expr", "tz", "check_id"),
    [
        ("61 * * * *", "UTC", "awa.E030"),
        ("* * * *", "UTC", "awa.E030"),
        ("* * * * * * *", "UTC", "awa.E030"),
        ("not a cron", "UTC", "awa.E030"),
        ("0 0 30 2 *", "UTC", "awa.E030"),
        ("*/61 * * * *", "UTC", "awa.E030"),
        ("5/70 * * * *", "UTC", "awa.E030"),
        ("0 */25 * * *", "UTC", "awa.E030"),
        ("0 0 1,*/32 * *", "UTC", "awa.E030"),
        ("0 0 1 */13 *", "UTC", "awa.E030"),
        ("0 0 * * 1-5/8", "UTC", "awa.E030"),
        ("*/61 * * * * *", "UTC", "awa.E030"),
        ("", "UTC", "awa.E030"),
        ("* * * * *", "Mars/Olympus", "awa.E031"),
        ("* * * * *", "", "awa.E031"),
    ],
)
def test_invalid_expression_or_timezone_names_its_check(expr, tz, check_id):
    with pytest.raises(InvalidSchedule) as raised:
        CronExpression(expr, tz)
    assert raised.value.check_id == check_id


@pytest.mark.parametrize(
    "expr", ["*/60 * * * *", "0 */24 * * *", "0 0 */31 * *", "0 0 1 */12 *", "0 0 * * */7"]
)
def test_a_step_as_long_as_its_field_is_accepted(expr):
    assert CronExpression(expr, "UTC").expr == expr


def test_a_step_longer_than_its_field_says_which_field():
    with pytest.raises(InvalidSchedule, match="steps its minute field by 61"):
        CronExpression("*/61 * * * *", "UTC")
    with pytest.raises(InvalidSchedule, match="steps its second field by 90"):
        CronExpression("*/90 0 * * * *", "UTC")


def test_aliases_are_accepted():
    assert CronExpression("@hourly", "UTC").ticks_between(T0, T0 + timedelta(hours=2), limit=5) == [
        T0 + timedelta(hours=1)
    ]


def test_coalesce_owes_only_the_newest_missed_tick():
    assert due_ticks(schedule("*/5 * * * *"), max_catch_up=100) == [T0 + timedelta(minutes=15)]


def test_catch_up_owes_every_missed_tick_once():
    assert due_ticks(schedule("*/5 * * * *", policy="catch_up"), max_catch_up=100) == [
        T0 + timedelta(minutes=m) for m in (5, 10, 15)
    ]


def test_catch_up_is_capped_to_the_newest_ticks():
    ticks = due_ticks(schedule("* * * * *", policy="catch_up"), max_catch_up=4)
    assert ticks == [T0 + timedelta(minutes=m) for m in (14, 15, 16, 17)]


def test_nothing_is_owed_after_the_last_fire():
    last = T0 + timedelta(minutes=15)
    assert due_ticks(schedule("*/5 * * * *", policy="catch_up", last=last), max_catch_up=9) == []


def test_ticks_inside_a_pause_are_skipped_after_resume():
    resumed = T0 + timedelta(minutes=12)
    ticks = due_ticks(
        schedule("*/5 * * * *", policy="catch_up", last=T0 + timedelta(minutes=5), resumed=resumed),
        max_catch_up=9,
    )
    assert ticks == [T0 + timedelta(minutes=15)]
