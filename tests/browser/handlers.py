"""Handlers the browser test's worker runs (imported through AWA_JOB_MODULES)."""

from __future__ import annotations

import awa_django as awa
from awa_django.jobs import JobContext


@awa.job(kind="tests.browser.charge_order", max_attempts=1)
def charge_order(ctx: JobContext, order: int) -> None:
    # The first attempt ever (run_lease 1) fails; a retry from the DLQ gets a larger run_lease
    # and succeeds, like a payment gateway that was down for a while.
    if ctx.run_lease == 1:
        raise RuntimeError(f"payment gateway timed out charging order {order}")
