"""Job tasks start eagerly where Python can (3.12+): the handler's first step has run by the
time its task exists. On 3.11 it runs at the event loop's next turn, as any task's does."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from awa_django.worker.dispatcher import start_task


def test_a_job_task_takes_its_first_step_when_python_allows_it() -> None:
    steps: list[str] = []

    async def handler() -> None:
        steps.append("first step")
        await asyncio.sleep(0)
        steps.append("after waiting")

    async def main() -> tuple[list[str], list[str], str | None]:
        task = start_task(handler(), name="awa-job-1")
        at_creation = list(steps)
        await task
        # The task still runs in its own context and under its own name.
        return at_creation, list(steps), task.get_name()

    at_creation, finished, name = asyncio.run(main())
    expected_at_creation = ["first step"] if sys.version_info >= (3, 12) else []
    assert at_creation == expected_at_creation
    assert finished == ["first step", "after waiting"]
    assert name == "awa-job-1"


# The Python calls of starting one job's task on 3.11, given the running loop as the
# dispatcher gives it (looked up once per claimed batch): 10, the loop's scheduling of its first
# step (call_soon and its handle) and the registration in asyncio's set of tasks. Through
# asyncio.create_task it was 16 (the wrapper, the loop's create_task and its checks, the name
# set through a helper), and 11 with the loop looked up per task. One more allows a weak
# reference's callback falling in the loop.
MAX_CALLS_TO_START = 11


# Counted in a process of its own: in one where another test interrupted a thread
# (``InterruptibleCall``, test_interrupt.py), profiling this loop never ends on 3.11.
COUNT_STARTS = """
import asyncio, cProfile, pstats
from awa_django.worker.dispatcher import start_task

async def handler():
    pass

async def main():
    coros = [handler() for _ in range(100)]
    profile = cProfile.Profile()
    profile.enable()
    loop = asyncio.get_running_loop()
    started = [start_task(coro, name=f"awa-job-{n}", loop=loop) for n, coro in enumerate(coros)]
    profile.disable()
    await asyncio.gather(*started)
    # Less the comprehension and the profiler's own disable.
    return (sum(entry[1] for entry in pstats.Stats(profile).stats.values()) - 2) / len(coros)

print(asyncio.run(main()))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ runs the first step eagerly")
def test_starting_a_job_task_costs_only_the_event_loop_s_own_calls() -> None:
    counted = subprocess.run(
        [sys.executable, "-c", COUNT_STARTS], capture_output=True, text=True, check=True
    )
    assert 0 < float(counted.stdout) <= MAX_CALLS_TO_START
