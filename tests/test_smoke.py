import pytest

import awa_django as awa
from tests.conftest import run_burst
from tests.jobs import record


@pytest.mark.usefixtures("awa_db")
def test_enqueued_job_runs_once():
    job_id = record.enqueue(n=1)
    summary = run_burst()
    assert summary.claimed == 1
    assert awa.get_job(job_id).state == "completed"
