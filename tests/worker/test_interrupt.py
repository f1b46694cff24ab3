"""InterruptibleCall: a sync handler's thread raises DeadlineExceeded where it runs, and only
while the call runs."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from awa_django.exceptions import DeadlineExceeded
from awa_django.worker.interrupt import InterruptibleCall


def busy(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


def in_thread(target) -> list[object]:
    """Run ``target`` in a thread; what it returned or raised."""
    outcome: list[object] = []

    def main() -> None:
        try:
            outcome.append(target())
        except BaseException as exc:  # what the worker's thread would see
            outcome.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    return outcome, thread


def test_an_interrupt_stops_the_call_where_it_runs():
    call = InterruptibleCall()
    outcome, thread = in_thread(lambda: call.run(busy, 30))
    time.sleep(0.2)
    started = time.monotonic()
    call.interrupt()
    thread.join(5)
    assert not thread.is_alive()
    assert time.monotonic() - started < 5
    (raised,) = outcome
    assert isinstance(raised, DeadlineExceeded)
    assert call.interrupted


def test_an_interrupt_before_the_call_starts_stops_it_before_it_runs():
    call = InterruptibleCall()
    call.interrupt()
    ran = []
    with pytest.raises(DeadlineExceeded):
        call.run(ran.append, 1)
    assert ran == []


def test_an_interrupt_after_the_call_returned_is_never_raised():
    call = InterruptibleCall()

    def after() -> str:
        assert call.run(busy, 0.01) == "done"
        call.interrupt()  # late: the call is over
        return busy(0.3)  # the thread runs on undisturbed

    outcome, thread = in_thread(after)
    thread.join(5)
    assert outcome == ["done"]


def test_an_interrupt_racing_the_end_of_the_call_stays_inside_it():
    # Interrupts land at every point around the end of many short calls: each one is either
    # raised by run() or dropped, never in the code after it.
    escaped: list[BaseException] = []
    calls: list[InterruptibleCall] = []
    ready = threading.Semaphore(0)
    done = threading.Event()

    def worker() -> None:
        for _ in range(2000):
            call = InterruptibleCall()
            calls.append(call)
            ready.release()
            try:
                with contextlib.suppress(DeadlineExceeded):
                    call.run(busy, 0.0002)
                busy(0.0001)  # the worker's own code after the handler
            except BaseException as exc:
                escaped.append(exc)
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    while not done.is_set():
        if ready.acquire(timeout=0.1):
            time.sleep(0.0001 * (len(calls) % 4))
            calls[-1].interrupt()
    thread.join(10)
    assert escaped == []
    assert any(call.interrupted for call in calls)
