"""The threads sync handlers run on: results and errors reach the right caller, finished calls
wake the event loop once per burst rather than once each, and shutdown cancels what has not
started."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from awa_django.worker.handler_threads import HandlerThreads


def fail(message: str) -> None:
    raise ValueError(message)


def stop() -> None:
    raise StopIteration


def test_each_caller_gets_its_own_result_or_error() -> None:
    async def main() -> list[Any]:
        threads = HandlerThreads(4)
        try:
            calls = [threads.run(lambda n=n: n * n) for n in range(50)]
            results = await asyncio.gather(*calls)
            with pytest.raises(ValueError, match="boom"):
                await threads.run(fail, "boom")
            # A future refuses StopIteration; the caller gets a RuntimeError naming it.
            with pytest.raises(RuntimeError, match="StopIteration"):
                await threads.run(stop)
            return [results, len(threads._threads)]
        finally:
            threads.shutdown()

    results, started = asyncio.run(main())
    assert results == [n * n for n in range(50)]
    assert 1 <= started <= 4


def test_calls_finished_together_wake_the_loop_once() -> None:
    async def main() -> tuple[list[int], int]:
        loop = asyncio.get_running_loop()
        wakeups = 0
        schedule = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal wakeups
            wakeups += 1
            return schedule(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        threads = HandlerThreads(8)
        try:
            calls = [asyncio.ensure_future(threads.run(lambda n=n: n)) for n in range(8)]
            await asyncio.sleep(0)  # every call is queued for a thread
            # The loop is busy while the threads finish, as it is while it runs other jobs.
            time.sleep(0.3)
            return list(await asyncio.gather(*calls)), wakeups
        finally:
            threads.shutdown()

    results, wakeups = asyncio.run(main())
    assert results == list(range(8))
    assert wakeups == 1


def test_shutdown_cancels_calls_not_started_and_lets_running_ones_finish() -> None:
    release = threading.Event()

    async def main() -> tuple[int, bool, list[threading.Thread]]:
        threads = HandlerThreads(1)
        running = asyncio.ensure_future(threads.run(lambda: release.wait(5) and 7))
        waiting = asyncio.ensure_future(threads.run(lambda: 8))
        await asyncio.sleep(0.05)  # the single thread has taken the first call
        threads.shutdown()
        await asyncio.sleep(0)
        waiting_cancelled = waiting.cancelled()
        with pytest.raises(RuntimeError, match="shut down"):
            await threads.run(lambda: 9)
        release.set()
        return await running, waiting_cancelled, list(threads._threads)

    first, waiting_cancelled, started = asyncio.run(main())
    assert (first, waiting_cancelled) == (7, True)
    for thread in started:
        thread.join(5)
        assert not thread.is_alive()


def test_a_cancelled_caller_does_not_stop_the_threads() -> None:
    release = threading.Event()

    async def main() -> int:
        threads = HandlerThreads(1)
        try:
            abandoned = asyncio.ensure_future(threads.run(release.wait, 5))
            await asyncio.sleep(0.05)
            abandoned.cancel()
            await asyncio.sleep(0)
            release.set()
            # The thread finishes the abandoned call, drops its result and serves the next.
            return await asyncio.wait_for(threads.run(lambda: 11), 5)
        finally:
            threads.shutdown()

    assert asyncio.run(main()) == 11


EXIT_WITHOUT_SHUTDOWN = """
import asyncio
from awa_django.worker.handler_threads import HandlerThreads

async def main():
    threads = HandlerThreads(4)
    assert await threads.run(lambda: 5) == 5
    # No shutdown: an error path of the worker could end like this.

asyncio.run(main())
print("finished", flush=True)
"""


def test_a_process_exits_without_waiting_for_idle_handler_threads() -> None:
    # A real interpreter exit: one waiting for non-daemon threads blocked on the work queue
    # would never end.
    done = subprocess.run(
        [sys.executable, "-c", EXIT_WITHOUT_SHUTDOWN], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout.strip()) == (0, "finished"), done.stderr
