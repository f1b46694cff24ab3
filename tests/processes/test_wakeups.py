"""Wake-ups with real worker processes (awa_django/worker/wake.py): producers notify only a
worker that waits, and no job waits for the poll interval, here 30 s, to be seen."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

from django.db import connection

import awa_django as awa
from tests.callbacks.helpers import wait_for_state, wait_for_token
from tests.conftest import wait_until
from tests.processes.test_idle_cost import commits

POLL = {"AWA_OVERRIDES": json.dumps({"POLL_INTERVAL_S": 30})}


def started_after_commit(job_id: int) -> float:
    """Seconds from the job's enqueue to its handler's start, on the database clock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT at FROM tests_job_runs WHERE job_id = %s", [job_id])
        row = cursor.fetchone()
    assert row is not None, f"job {job_id} did not run"
    return (row[0] - awa.get_job(job_id).created_at).total_seconds()


def test_an_idle_worker_is_woken_by_every_commit(worker_process):
    worker_process("--queue", "default=2", env=POLL).wait_ready()
    # Apart enough that the worker goes back to waiting (armed) between jobs, and at the edge
    # of its hot polling window too.
    job_ids = []
    for gap_s in (0.0, 0.05, 0.005, 0.03, 0.2, 0.012, 0.5, 0.008, 0.1):
        time.sleep(gap_s)
        job_ids.append(awa.enqueue("tests.record", args={"n": len(job_ids)}))
    wait_until(lambda: all(awa.get_job(j).state == "completed" for j in job_ids), timeout=10)
    assert max(started_after_commit(j) for j in job_ids) < 2.0


def test_a_job_enqueued_after_a_long_idle_starts_through_its_notification(worker_process):
    # A poll interval of 0.1 s: idle for 3.5 s, the waiting worker's poll has backed off to its
    # bound, 16 intervals (worker/wake.py, #37). The job still starts at once: the NOTIFY
    # wakes the worker, not the poll.
    fast = {"AWA_OVERRIDES": json.dumps({"POLL_INTERVAL_S": 0.1})}
    worker_process("--queue", "default=2", env=fast).wait_ready()
    time.sleep(3.5)
    job_id = awa.enqueue("tests.record", args={"n": 0})
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=10)
    assert started_after_commit(job_id) < 0.5


def test_another_worker_takes_over_waiting_when_the_waiting_one_stops(worker_process):
    first = worker_process("--queue", "default=2", env=POLL).wait_ready()
    second = worker_process("--queue", "default=2", env=POLL).wait_ready()
    warm = awa.enqueue("tests.record", args={"n": 0})
    wait_until(lambda: awa.get_job(warm).state == "completed", timeout=10)
    time.sleep(0.3)  # both idle: one of them holds the queue's wake lock
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait() == 0
    time.sleep(0.3)
    job_id = awa.enqueue("tests.record", args={"n": 1})
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=10)
    assert started_after_commit(job_id) < 2.0
    assert second.proc.poll() is None


def test_a_busy_candidate_hands_waiting_over_to_an_idle_worker(worker_process):
    # Each worker runs one job at a time, and polls only every 30 s. Whichever was the queue's
    # waiting candidate, once one runs the first job the other must be the one woken for the
    # second: the busy one gave its wake locks back and notified (release_wake), so the idle one
    # took over waiting, rather than both sleeping until their next poll.
    workers = [worker_process("--queue", "default=1", env=POLL).wait_ready() for _ in range(2)]
    # Which of them ends up waiting is a race each round, hence several rounds.
    for round_ in range(5):
        time.sleep(0.5)  # both idle: one holds the wake lock, the other sleeps
        busy = awa.enqueue("tests.sleepy", args={"seconds": 1.5})
        wait_until(lambda busy=busy: awa.get_job(busy).state == "running", timeout=5)
        time.sleep(0.2)
        second = awa.enqueue("tests.record", args={"n": round_})
        wait_until(lambda second=second: awa.get_job(second).state == "completed", timeout=40)
        assert started_after_commit(second) < 1.0, round_
        wait_until(lambda busy=busy: awa.get_job(busy).state == "completed", timeout=5)
    assert all(worker.proc.poll() is None for worker in workers)


def session_backend_pids() -> set[int]:
    """The server pids of the worker's session connections (the one that LISTENs)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'awa_worker_session'"
        )
        return {pid for (pid,) in cursor.fetchall()}


def terminate_the_listener() -> int:
    """End the worker's LISTEN connection (its session) from the server side, as a failover or
    a network cut would, and return its pid once its backend has exited: a notification sent
    before then could still reach the dying backend's client."""
    (pid,) = session_backend_pids()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])
        assert cursor.fetchone() == (True,)
    return pid


def wait_for_a_new_session(lost: int) -> None:
    """The worker reconnected its session. Which of its users meets the loss first (the
    listener, a wake lock, the leader's lease) and so which warning is logged is a race, so the
    check is the server's, not a log line."""
    wait_until(lambda: bool(session_backend_pids() - {lost}), timeout=10)


def test_work_committed_while_the_listen_connection_was_down_is_claimed_once_it_is_back(
    worker_process,
):
    worker_process("--queue", "default=2", env=POLL).wait_ready()
    time.sleep(0.3)
    lost = terminate_the_listener()
    job_id = awa.enqueue("tests.record", args={"n": 1})
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=10)
    assert started_after_commit(job_id) < 5.0
    wait_for_a_new_session(lost)


def test_a_resume_committed_while_the_listen_connection_was_down_reaches_its_waiting_handler(
    worker_process,
):
    worker_process("--queue", "default=2", env=POLL).wait_ready()
    job_id = awa.enqueue("tests.waits", args={})  # waits in its attempt for a resume
    token = wait_for_token(job_id)
    wait_for_state(job_id, "waiting_external")
    lost = terminate_the_listener()
    # Its NOTIFY awa_callback reaches no one: the handler's wait polls once the listener is
    # back, not 30 s later.
    awa.resume_external(token, {"approved": True})
    wait_for_state(job_id, "completed", timeout=10)
    wait_for_a_new_session(lost)


def local_ports_of(pid: int) -> set[int]:
    """The local TCP ports of process ``pid``'s sockets (its connections to the server)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[9] in inodes:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def candidate_port() -> int | None:
    """The client port of the session that holds the default queue's candidate lock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.classid = 1096237399"
            " AND l.objid = hashtext('default')::oid AND l.granted"
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def test_a_candidate_that_dies_is_replaced_by_the_session_tries(worker_process):
    """#37: the other workers of a queue try its candidate lock only with their session tries
    (every 4 s at most in a small fleet: two LEADER_ELECTION_INTERVAL_S), never by claiming.
    Once the candidate is SIGKILLed, a job enqueued into the idle queue still starts within
    that bound, though the poll interval is 30 s and no commit notifies anyone meanwhile."""
    workers = [worker_process("--queue", "default=2", env=POLL).wait_ready() for _ in range(2)]
    wait_until(lambda: candidate_port() is not None, timeout=10)
    port = candidate_port()
    (candidate,) = [w for w in workers if port in local_ports_of(w.proc.pid)]
    (other,) = [w for w in workers if w is not candidate]
    candidate.proc.send_signal(signal.SIGKILL)
    candidate.proc.wait()
    # The candidate's session ends with it: the other worker's next tick takes the lock.
    wait_until(lambda: candidate_port() not in (None, port), timeout=6)
    assert candidate_port() in local_ports_of(other.proc.pid)
    time.sleep(0.3)
    job_id = awa.enqueue("tests.record", args={"n": 1})
    wait_until(lambda: awa.get_job(job_id).state == "completed", timeout=10)
    assert started_after_commit(job_id) < 2.0


def test_a_commit_into_an_idle_fleet_wakes_its_candidate_alone(worker_process):
    # Eight idle workers, and jobs enqueued one at a time. Every worker gets every NOTIFY; when
    # each of them claimed for it, a job into an idle fleet cost about three statements per
    # worker (a claim, a claim waiting its turn at the lane, a try of the candidate lock), all
    # but one for nothing (#37). Only the queue's candidate claims for a commit now, and stays
    # the candidate while its claims leave it slots, so a job costs a few transactions
    # whatever the fleet's size, and still starts without waiting for a poll (30 s here).
    workers = [worker_process("--queue", "default=2", env=POLL) for _ in range(8)]
    for worker in workers:
        worker.wait_ready()
    wait_until(lambda: any("became maintenance leader" in w.output for w in workers))
    time.sleep(2)  # past start-up: every dispatcher has gone idle

    def committed_over(window_s: float, enqueue: int) -> tuple[int, list[int]]:
        # Commits on the database over the window (pg_stat_database), enqueueing a job every
        # 0.3 s at its start; nothing else is read meanwhile. The window outlasts the time an
        # idle backend keeps its statistics before reporting them.
        before, started = commits(), time.monotonic()
        job_ids = []
        for n in range(enqueue):
            job_ids.append(awa.enqueue("tests.record", args={"n": n}))
            time.sleep(0.3)
        time.sleep(window_s - (time.monotonic() - started))
        return commits() - before, job_ids

    idle, _ = committed_over(14, 0)
    busy, job_ids = committed_over(14, 10)
    assert all(awa.get_job(j).state == "completed" for j in job_ids)
    assert max(started_after_commit(j) for j in job_ids) < 2.0
    per_job = (busy - idle) / len(job_ids)
    print("transactions per job", per_job, "idle window", idle)
    # Per job: its enqueue, the candidate's claims and wake-lock statements, the handler's
    # connection and write, the close: under 20 here, where every worker claiming for each
    # commit made it over 50.
    assert per_job < 30, per_job
