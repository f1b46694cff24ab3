"""Maintenance passes describe what they did in words, not as the repr of their result."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest

from awa_django.logs import JsonFormatter
from awa_django.maintenance.cron_evaluator import CronResult, FiredSchedule
from awa_django.maintenance.ledgers import LedgerResult
from awa_django.maintenance.promoter import PromoterResult
from awa_django.maintenance.queue_stats import QueueStatsResult
from awa_django.maintenance.rescuer import RescuerResult
from awa_django.maintenance.retention import RetentionResult
from awa_django.maintenance.rings import RingResult
from awa_django.maintenance.runtime_cleanup import RuntimeCleanupResult
from awa_django.maintenance.service import run_task
from awa_django.maintenance.unique_sweeper import UniqueSweepResult

TICK = "2026-12-02T03:00:00+00:00"


@pytest.mark.parametrize(
    ("result", "words"),
    [
        (PromoterResult(1), "moved 1 due job into the ready queue"),
        (PromoterResult(3), "moved 3 due jobs into the ready queue"),
        (PromoterResult(0), "no scheduled or retrying job due"),
        (RescuerResult(2, 2), "rescued 2 attempts"),
        (RescuerResult(3, 1), "rescued 1 attempt of 3 found (the others closed meanwhile)"),
        (RescuerResult(0, 0), "nothing to rescue"),
        (
            RingResult("rotated", "pruned", "skipped_idle", "nothing_to_prune"),
            "queue ring rotated, pruned; lease ring not rotated (its current slot is "
            "empty), nothing to prune",
        ),
        (
            RingResult("skipped_busy", "retention", "skipped_locked", "skipped_locked"),
            "queue ring not rotated (its next slot is not pruned yet), prune waits for completed "
            "jobs inside their retention; lease ring not rotated (another rotation or prune held "
            "the lock), prune skipped (its slot was locked)",
        ),
        (
            RetentionResult(1, 12),
            "deleted 1 expired DLQ entry and 12 expired failed or cancelled jobs",
        ),
        (
            RuntimeCleanupResult(2, 1),
            "deleted 2 silent runtimes and 1 descriptor version nothing declares any more",
        ),
        (UniqueSweepResult(4), "dropped 4 unique claims that can no longer conflict"),
        (LedgerResult(1), "deleted 1 superseded ledger row (rate limits, lane marks)"),
        (QueueStatsResult(()), "measured 0 queues"),
        (CronResult(0, 0, 0), "no schedule due"),
        (
            CronResult(
                enqueued=1,
                fired=1,
                lost=1,
                fires=(
                    FiredSchedule(name="nightly", ticks=(TICK,), job_ids=(42,)),
                    FiredSchedule(name="hourly", ticks=(TICK,), job_ids=()),
                ),
            ),
            f"fired 1 schedule: nightly for {TICK} (job 42); "
            f"hourly for {TICK} already fired by another leader",
        ),
        (
            CronResult(
                enqueued=7,
                fired=1,
                lost=0,
                fires=(FiredSchedule(name="catch", ticks=(TICK,) * 7, job_ids=tuple(range(1, 8))),),
            ),
            "fired 1 schedule: catch for 7 ticks (jobs 1, 2, 3, 4, 5 and 2 more)",
        ),
    ],
)
def test_each_result_says_what_the_pass_did(result, words):
    assert result.describe() == words
    assert "Result(" not in result.describe()


class OnePass:
    """A maintenance task whose pass reports two jobs moved, and stops the loop after it."""

    name = "promoter"
    interval_s = 0.001

    def __init__(self, stopping: asyncio.Event) -> None:
        self._stopping = stopping

    async def run_once(self) -> PromoterResult:
        self._stopping.set()
        return PromoterResult(2)


def test_the_loop_logs_one_line_in_words_with_the_results_fields(caplog):
    caplog.set_level(logging.DEBUG, logger="awa_django.maintenance.service")

    async def one_pass() -> None:
        stopping = asyncio.Event()
        await run_task(OnePass(stopping), is_leader=lambda: True, stopping=stopping)

    asyncio.run(one_pass())
    # Only the loop's own lines: an earlier test's threads may still log elsewhere.
    (line,) = [r for r in caplog.records if r.name == "awa_django.maintenance.service"]
    assert line.levelno == logging.INFO
    assert re.fullmatch(
        r"maintenance promoter: moved 2 due jobs into the ready queue duration_ms=[\d.]+",
        line.getMessage(),
    )
    assert (line.task, line.moved, line.duration_ms >= 0) == ("promoter", 2, True)
    entry = json.loads(JsonFormatter().format(line))
    assert (entry["task"], entry["moved"]) == ("promoter", 2)


@pytest.mark.parametrize(
    ("result", "changed"),
    [
        (PromoterResult(0), False),
        (PromoterResult(2), True),
        (LedgerResult(0), False),
        (LedgerResult(1), True),
        (UniqueSweepResult(0), False),
        (UniqueSweepResult(1), True),
        (RuntimeCleanupResult(0, 0), False),
        (RuntimeCleanupResult(0, 1), True),
        (RuntimeCleanupResult(1, 0), True),
        (RetentionResult(0, 0, 0), False),
        (RetentionResult(0, 0, 1), True),
        (RetentionResult(0, 1, 0), True),
        (RetentionResult(1, 0, 0), True),
    ],
)
def test_a_pass_of_counts_changed_something_when_any_count_is_above_zero(result, changed):
    assert result.changed is changed
