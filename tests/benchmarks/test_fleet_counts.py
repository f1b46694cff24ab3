"""The fleet benchmark's statement totals (benchmarks/fleet.py), from pg_stat_statements counts
taken before and after a window: a pure function, no fleet."""

from __future__ import annotations

import pytest

from benchmarks.fleet import parse_args, statements_between


def test_the_idle_window_says_how_many_statements_were_still_planned() -> None:
    """#37: an idle fleet's statements are planned on their first runs on each connection, so a
    window that opens too early measures start-up; the totals say what share was planned."""
    before = {
        "1": ("UPDATE awa.runtime_instances", 10, 5.0, 10, 4.0),
        "2": ("SELECT awa.try_locks", 100, 8.0, 2, 0.2),
    }
    after = {
        "1": ("UPDATE awa.runtime_instances", 30, 15.0, 20, 8.0),
        "2": ("SELECT awa.try_locks", 160, 12.0, 2, 0.2),
        "3": ("SELECT FROM pg_stat_statements", 2, 1.0, 2, 0.5),  # the harness's own read
    }
    totals, listed = statements_between(before, after, 10.0, 15)
    assert totals == {
        "statements_per_s": 8.2,
        "plans_per_s": 1.2,
        "plan_ms_per_s": pytest.approx(0.45),
        "planned_share": pytest.approx(12 / 82),
    }
    assert listed is not None and [row["query"] for row in listed] == [
        "SELECT awa.try_locks",
        "UPDATE awa.runtime_instances",
    ]
    assert listed[1]["plans_per_s"] == 1.0
    assert statements_between(None, after, 10.0, 15) == (None, None)


def test_the_fleet_takes_awa_settings_for_a_shorter_planning_phase() -> None:
    # A snapshot interval ten times shorter reaches the steady state in a tenth of the warm-up.
    args = parse_args(["--awa", '{"RUNTIME_SNAPSHOT_INTERVAL_S": 1}'])
    assert args.awa == {"RUNTIME_SNAPSHOT_INTERVAL_S": 1}
    assert parse_args([]).awa == {}
