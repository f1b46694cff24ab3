"""Values that cannot name a job or a delay are answered in Python, never sent to PostgreSQL:
ids outside 1..2^63-1 name no job, and a retry or snooze delay must be a finite number of
seconds within 100 years."""

from __future__ import annotations

import pytest

import awa_django as awa
from awa_django.limits import MAX_ID, MAX_SECONDS
from tests.jobs import record

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.mark.parametrize("job_id", [0, -1, MAX_ID + 1, 2**64, 10**40])
def test_ids_outside_bigint_name_no_job(job_id):
    existing = record.enqueue(n=1)
    assert awa.get_job(job_id) is None
    assert [job.job_id for job in awa.get_jobs([job_id, existing])] == [existing]
    assert awa.cancel(job_id) is False
    assert awa.retry(job_id) is False
    assert awa.get_job(existing).state == "available"


@pytest.mark.parametrize(
    "seconds", [float("nan"), float("inf"), -1, 1e300, MAX_SECONDS + 1, True, "5"]
)
@pytest.mark.parametrize("outcome", [awa.RetryAfter, awa.Snooze])
def test_a_delay_no_timestamp_can_hold_is_refused_when_raised(outcome, seconds):
    with pytest.raises(ValueError, match=f"{outcome.__name__} seconds must be"):
        outcome(seconds)


def test_delays_up_to_a_hundred_years_are_accepted():
    assert awa.RetryAfter(MAX_SECONDS).seconds == MAX_SECONDS
    assert awa.Snooze(0).seconds == 0.0
