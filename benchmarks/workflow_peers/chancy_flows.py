"""Chancy's workflows (``WorkflowPlugin``), the workloads of benchmarks/workflows.py (run by it
under ``.venv-peers/chancy``, with ``DATABASE_URL`` naming the benchmark's database; Chancy
keeps its own ``chancy_*`` tables there).

One process: the driver and a Chancy ``Worker`` serving queue ``bench`` with its asyncio
executor (``--concurrency`` jobs at once) share one event loop, so a member's end and the
callback's start are read from one clock. Chancy reads a workflow's progress from its tables:
a step is queued by the plugin once its dependencies succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

from chancy import Chancy, Queue, Worker, job
from chancy.plugins.workflow import Workflow, WorkflowPlugin

ENDS: list[float] = []
CALLBACK: list[float] = []
QUEUE = "bench"


@job(queue=QUEUE)
async def noop() -> None:
    """A step: does nothing."""


@job(queue=QUEUE)
async def member() -> None:
    ENDS.append(time.time())


@job(queue=QUEUE)
async def callback() -> None:
    CALLBACK.append(time.time())


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def scalar(chancy: Chancy, query: str) -> Any:
    async with chancy.pool.connection() as conn:
        cursor = await conn.execute(query)
        row = await cursor.fetchone()
        return row[0] if row else None


async def until_idle(chancy: Chancy, timeout_s: float = 3600) -> None:
    """Until no workflow of the run is pending or running."""
    deadline = time.monotonic() + timeout_s
    query = "SELECT count(*) FROM chancy_workflows WHERE state IN ('pending', 'running')"
    while await scalar(chancy, query):
        if time.monotonic() > deadline:
            raise TimeoutError("workflows still running")
        await asyncio.sleep(0.01)


async def until_succeeded(chancy: Chancy, count: int, timeout_s: float = 3600) -> None:
    deadline = time.monotonic() + timeout_s
    query = "SELECT count(*) FROM chancy_jobs WHERE state = 'succeeded'"
    while (await scalar(chancy, query)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError("jobs still running")
        await asyncio.sleep(0.01)


async def push_all(chancy: Chancy, workflows: list[Workflow]) -> None:
    for workflow in workflows:
        await WorkflowPlugin.push(chancy, workflow)


async def run_chains(chancy: Chancy, count: int, length: int) -> dict[str, float]:
    flows = []
    for n in range(count):
        flow = Workflow(f"chain-{n}")
        for i in range(length):
            flow.add(str(i), noop, [str(i - 1)] if i else [])
        flows.append(flow)
    started = time.perf_counter()
    await push_all(chancy, flows)
    await until_idle(chancy)
    wall = time.perf_counter() - started
    return {"wall_s": wall, "steps_per_s": count * length / wall}


def a_chord(name: str, size: int, step: Any, last: Any) -> Workflow:
    flow = Workflow(name)
    flow.add_group([(str(i), step) for i in range(size)])
    flow.add("callback", last, [str(i) for i in range(size)])
    return flow


async def run_chords(chancy: Chancy, count: int, size: int) -> dict[str, Any]:
    gaps_ms: list[float] = []
    started = time.perf_counter()
    for n in range(count):
        ENDS.clear()
        CALLBACK.clear()
        await WorkflowPlugin.push(chancy, a_chord(f"chord-{n}", size, member, callback))
        await until_idle(chancy)
        gaps_ms.append((CALLBACK[0] - max(ENDS)) * 1000)
    return {
        "wall_s": time.perf_counter() - started,
        "callback_gap_ms": gaps_ms,
        "p50_ms": percentile(gaps_ms, 0.5),
        "p99_ms": percentile(gaps_ms, 0.99),
    }


async def run_groups(chancy: Chancy, count: int, size: int) -> dict[str, float]:
    flows = [a_chord(f"group-{n}", size, noop, noop) for n in range(count)]
    started = time.perf_counter()
    await push_all(chancy, flows)
    await until_idle(chancy)
    return {"wall_s": time.perf_counter() - started}


async def run_drain(chancy: Chancy, count: int) -> dict[str, float]:
    started = time.perf_counter()
    async for _ in chancy.push_many([noop.job for _ in range(count)]):
        pass  # an async generator of the references, one batch at a time
    await until_succeeded(chancy, count)
    plain = count / (time.perf_counter() - started)
    flow = Workflow("drain")
    flow.add_group([(str(i), noop) for i in range(count)])
    started = time.perf_counter()
    await WorkflowPlugin.push(chancy, flow)
    await until_idle(chancy)
    steps = count / (time.perf_counter() - started)
    return {"plain_jobs_per_s": plain, "steps_per_s": steps, "ratio": steps / plain}


async def fresh(chancy: Chancy) -> None:
    async with chancy.pool.connection() as conn:
        await conn.execute("TRUNCATE chancy_jobs, chancy_workflows, chancy_workflow_steps")


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import chancy as chancy_package

    results: dict[str, Any] = {"version": getattr(chancy_package, "__version__", "?")}
    async with Chancy(os.environ["DATABASE_URL"]) as chancy:
        await chancy.migrate()
        await chancy.declare(
            Queue(
                QUEUE,
                concurrency=args.concurrency,
                executor="chancy.executors.asyncex.AsyncExecutor",
                polling_interval=1,
                eager_polling=True,
            ),
            upsert=True,
        )
        await fresh(chancy)
        async with Worker(chancy, register_signal_handlers=False):
            # Workflows advance on the leader only: the first one waits for this worker to win
            # the leadership, which is not what is measured.
            started = time.perf_counter()
            await WorkflowPlugin.push(chancy, Workflow("warm-up").add("1", noop))
            await until_idle(chancy)
            results["warm_up_s"] = time.perf_counter() - started
            await fresh(chancy)
            results["chains"] = await run_chains(chancy, args.chains, args.chain_length)
            await fresh(chancy)
            results["chords"] = await run_chords(chancy, args.chords, args.chord_size)
            await fresh(chancy)
            results["groups"] = await run_groups(chancy, args.groups, args.group_size)
            await fresh(chancy)
            results["drain"] = await run_drain(chancy, args.drain)
    return results


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("chains", "chain-length", "chords", "chord-size", "groups", "group-size",
                 "drain", "concurrency"):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, required=True)
    results = asyncio.run(main_async(parser.parse_args()))
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
