"""Job tasks start eagerly where Python can (3.12+): the handler's first step has run by the
time its task exists. On 3.11 it runs at the event loop's next turn, as any task's does."""

from __future__ import annotations

import asyncio
import sys

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
