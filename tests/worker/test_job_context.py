"""A handler's ``JobContext`` carries its attempt's claim (claimant and time) as the claim's
receipt records it, in a worker and in an in-process run alike."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection

import awa_django as awa
from awa_django.storage import statement
from awa_django.storage.jobs import get_claims
from awa_django.testing import run_jobs
from tests.conftest import run_burst
from tests.jobs import claim_seen

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.mark.parametrize("run", [run_burst, run_jobs], ids=["worker", "in-process"])
def test_the_context_holds_the_claim_its_receipt_records(run: Callable[[], object]):
    job_id = claim_seen.enqueue()
    run()
    with connection.cursor() as cursor:
        (claim,) = statement.run(cursor, get_claims([job_id]))[job_id]
    assert awa.get_job(job_id).result == {
        "by": claim.claimed_by,
        "at": claim.claimed_at.isoformat(),
    }
