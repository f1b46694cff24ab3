"""``awa_health``'s leader check right after a deploy: a worker's snapshot says it leads as
soon as it takes the lock (not at its next interval), and a fleet whose workers only just
started is *starting*, which passes, not "no leader", which fails a liveness probe."""

from __future__ import annotations

import pytest
from django.test import override_settings

import awa_django as awa
from awa_django.ops.health import Check
from tests.conftest import BackgroundWorker, wait_until
from tests.jobs import sleepy

pytestmark = pytest.mark.usefixtures("awa_db")

QUEUES = {"default": {}}


def leader_check() -> Check:
    return {check.name: check for check in awa.health.check().checks}["leader"]


def test_a_worker_reports_leadership_as_soon_as_it_takes_the_lock():
    # No periodic snapshot falls inside the test: only the one leadership triggers can show it.
    slow = {"RUNTIME_SNAPSHOT_INTERVAL_S": 600.0, "RUNTIME_STALE_AFTER_S": 1200.0}
    with override_settings(AWA={"QUEUES": QUEUES, "LEADER_ELECTION_INTERVAL_S": 0.1, **slow}):
        worker = BackgroundWorker().start()
        try:
            wait_until(lambda: awa.runtimes.leader() is not None, timeout=15)
            assert awa.runtimes.leader().instance_id == worker.runtime.identity
            check = leader_check()
            assert check.ok and check.detail.startswith(f"leader {worker.runtime.identity}")
        finally:
            worker.stop()


def test_a_fleet_that_just_started_is_starting_then_leaderless():
    # A worker that never competes for the lock: its row never says it leads.
    with override_settings(AWA={"QUEUES": QUEUES}):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            report = awa.health.check()
            check = leader_check()
            assert check.ok, check.detail
            assert check.detail.startswith("starting: no leader elected yet; runtime ")
            assert worker.runtime.identity in check.detail
            assert report.healthy, report.as_dict()
            # Past LEADER_ELECTION_INTERVAL_S + RUNTIME_SNAPSHOT_INTERVAL_S of the reader's
            # settings, a fleet without a leader fails.
            short = {"LEADER_ELECTION_INTERVAL_S": 0.05, "RUNTIME_SNAPSHOT_INTERVAL_S": 0.1}
            with override_settings(AWA={"QUEUES": QUEUES, **short}):
                wait_until(lambda: not leader_check().ok)
                assert leader_check().detail.startswith(
                    "no live runtime holds maintenance leadership"
                )
                assert not awa.health.check().healthy
        finally:
            worker.stop()


def test_a_draining_worker_is_not_starting():
    with override_settings(AWA={"QUEUES": QUEUES}):
        worker = BackgroundWorker(maintenance=False).start()
        try:
            job_id = sleepy.enqueue(seconds=3)
            wait_until(lambda: awa.get_job(job_id).state == "running")
            worker._loop.call_soon_threadsafe(worker.runtime.request_stop)
            wait_until(lambda: awa.runtimes.list()[0].shutting_down)
            check = leader_check()
            assert not check.ok
            assert check.detail.startswith("no live runtime holds maintenance leadership")
        finally:
            worker.stop()
