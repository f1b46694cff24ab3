"""Each schedule's recent fires (awa.cron_fires, migration 0015): the jobs its fires and
triggers enqueued, newest first, with their outcomes; the newest 50 are kept."""

from __future__ import annotations

import pytest

import awa_django as awa
from awa_django.testing import run_jobs
from tests.maintenance.test_cron import age_schedule, cron_jobs, run_once, sql, store

pytestmark = pytest.mark.usefixtures("awa_db")


def test_fires_and_triggers_are_listed_newest_first_with_their_outcomes():
    store(name="tests.history", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.history", 3)
    assert run_once().enqueued == 3
    triggered = awa.cron.trigger("tests.history")
    assert run_jobs().completed == 4

    fires = awa.cron.recent_fires()["tests.history"]
    fired = [f["job_id"] for f in cron_jobs("tests.history")]
    assert [f.job_id for f in fires] == sorted(fired, reverse=True)
    assert fires[0].job_id == triggered and fires[0].tick is None
    assert all(f.tick is not None for f in fires[1:])
    assert [f.tick for f in fires[1:]] == sorted((f.tick for f in fires[1:]), reverse=True)
    assert {f.state for f in fires} == {"completed"}
    assert all(f.finalized_at is not None for f in fires)
    # A schedule that never fired is left out; per_schedule bounds each schedule's list.
    store(name="tests.quiet")
    assert "tests.quiet" not in awa.cron.recent_fires()
    assert len(awa.cron.recent_fires(2)["tests.history"]) == 2


def test_a_fire_that_has_not_run_yet_reads_available():
    store(name="tests.waiting", schedule="* * * * *")
    age_schedule("tests.waiting", 2)
    run_once()
    [fire] = awa.cron.recent_fires()["tests.waiting"]
    assert fire.state == "available" and fire.finalized_at is None


def test_only_the_newest_fifty_fires_of_a_schedule_are_kept():
    store(name="tests.busy", schedule="* * * * *", missed="catch_up")
    store(name="tests.other", schedule="* * * * *", missed="catch_up")
    age_schedule("tests.other", 3)
    age_schedule("tests.busy", 60)
    evaluated = run_once()
    assert evaluated.enqueued == 63
    kept = sql("SELECT name, count(*) FROM awa.cron_fires GROUP BY name ORDER BY name")
    assert kept == [("tests.busy", 50), ("tests.other", 3)]
    newest = sorted((f["job_id"] for f in cron_jobs("tests.busy")), reverse=True)[:50]
    assert [f.job_id for f in awa.cron.recent_fires(50)["tests.busy"]] == newest


def test_removing_a_schedule_removes_its_history():
    store(name="tests.gone", schedule="* * * * *")
    age_schedule("tests.gone", 1)
    run_once()
    assert awa.cron.remove("tests.gone")
    assert sql("SELECT count(*) FROM awa.cron_fires WHERE name = 'tests.gone'") == [(0,)]


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (51, ValueError), ("3", TypeError)])
def test_recent_fires_refuses_a_bad_count(bad, error):
    with pytest.raises(error, match="per_schedule"):
        awa.cron.recent_fires(bad)
