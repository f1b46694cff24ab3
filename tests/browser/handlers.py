"""Handlers the browser test's worker runs (imported through AWA_JOB_MODULES)."""

from __future__ import annotations

import time

import awa_django as awa
from awa_django.declarations.jobs import JobContext


@awa.job(kind="tests.browser.charge_order", max_attempts=1)
def charge_order(ctx: JobContext, order: int) -> None:
    # The first attempt ever (run_lease 1) fails; a retry from the DLQ gets a larger run_lease
    # and succeeds, like a payment gateway that was down for a while.
    if ctx.run_lease == 1:
        raise RuntimeError(f"payment gateway timed out charging order {order}")


@awa.job(kind="tests.browser.crunch_report")
def crunch_report(ctx: JobContext, pages: int) -> None:
    # A long report that reports its progress page by page, for the running-jobs page.
    for page in range(1, pages + 1):
        ctx.set_progress(100 * page / pages, f"page {page} of {pages}")
        for _ in range(10):
            if ctx.is_cancelled():
                return
            time.sleep(0.1)
