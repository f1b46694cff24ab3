"""Unique options and key computation, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import awa_django as awa
from awa_django.declarations.unique import unique_key

NOW = datetime(2026, 1, 1, 10, 30, tzinfo=UTC)


def key(unique: awa.Unique, *, kind="k", queue="default", args=None, now=NOW):
    return unique_key(unique, kind=kind, queue=queue, args=args or {"a": 1, "b": 2}, now=now)


def test_same_job_same_key_and_sixteen_bytes():
    assert key(awa.Unique()) == key(awa.Unique())
    assert len(key(awa.Unique()).digest) == 16


def test_args_and_kind_distinguish_by_default_but_queue_does_not():
    base = key(awa.Unique())
    assert key(awa.Unique(), args={"a": 1, "b": 3}) != base
    assert key(awa.Unique(), kind="other") != base
    assert key(awa.Unique(), queue="email") == base
    assert key(awa.Unique(by_queue=True), queue="email") != key(awa.Unique(by_queue=True))


def test_by_args_false_ignores_args_and_a_list_compares_only_those_names():
    assert key(awa.Unique(by_args=False), args={"x": 9}) == key(awa.Unique(by_args=False))
    only_a = awa.Unique(by_args=["a"])
    assert key(only_a, args={"a": 1, "b": 99}) == key(only_a)
    assert key(only_a, args={"a": 2, "b": 2}) != key(only_a)


def test_argument_order_does_not_matter():
    assert key(awa.Unique(), args={"b": 2, "a": 1}) == key(awa.Unique())


def test_period_buckets_the_key_and_reports_the_bucket_end():
    hourly = awa.Unique(period=timedelta(hours=1))
    first = key(hourly, now=NOW)
    assert key(hourly, now=NOW + timedelta(minutes=29)) == first
    assert key(hourly, now=NOW + timedelta(minutes=30)) != first
    assert first.expires_at == datetime(2026, 1, 1, 11, 0, tzinfo=UTC)
    assert key(awa.Unique()).expires_at is None


def test_states_are_normalised_and_defaults_cover_completed():
    assert awa.Unique().states == ("scheduled", "available", "running", "retryable", "completed")
    assert awa.Unique(states=["running", "available", "running"]).states == ("available", "running")


@pytest.mark.parametrize(
    "options",
    [
        {"states": ["bogus"]},
        {"states": []},
        {"period": timedelta(0)},
        {"period": 60},
        {"by_args": "a"},
        {"by_queue": "yes"},
    ],
)
def test_invalid_options_name_the_unique_field(options):
    with pytest.raises(awa.InvalidJob) as raised:
        awa.Unique(**options)
    assert raised.value.field == "unique"
