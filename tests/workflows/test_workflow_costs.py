"""What a workflow costs to enqueue and to fan in (#34), counted, not timed: rows written per
step from PostgreSQL's own statistics, and what a wide fan-in's release reads and writes.

- A step without dependencies is written once into the ready ring (no held row in
  awa.deferred_jobs written, updated and moved, no update of its awa.workflow_steps row).
- A fan-in with more dependencies than awa.workflow_inputs_copied() is released without its
  dependencies' results: the close that releases it reads a few rows, not one per member, and
  its job row stays small; it reads its inputs when it runs, in order and complete, from a sync
  or an async handler, in-process or in a worker process.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection, transaction

import awa_django as awa
from awa_django.declarations.enqueue_options import EnqueueOptions
from awa_django.exceptions import InvalidJob
from awa_django.telemetry import get_telemetry
from awa_django.testing import run_jobs, work_one
from tests.workflows.jobs import acollect, add, collect, split

WORKER_ENV = {"AWA_JOB_MODULES": "tests.jobs,tests.workflows.jobs"}
WIDE = 150


def copied_limit() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT awa.workflow_inputs_copied()")
        return int(cursor.fetchone()[0])


def table_counts(table: str) -> tuple[int, int, int, int]:
    """Rows of awa.<table> inserted, updated, deleted and read so far in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            # Summed over its partitions (the ready ring's table is partitioned).
            "SELECT sum(n_tup_ins), sum(n_tup_upd), sum(n_tup_del), "
            "sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)) "
            "FROM pg_stat_xact_user_tables WHERE relid = %(table)s::regclass OR relid IN "
            "(SELECT inhrelid FROM pg_inherits WHERE inhparent = %(table)s::regclass)",
            {"table": f"awa.{table}"},
        )
        row = cursor.fetchone()
    return tuple(int(value or 0) for value in row)  # type: ignore[return-value]


def delta(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(b - a for a, b in zip(before, after, strict=True))


def job_metadata(job_id: int) -> str:
    return json.dumps(awa.get_job(job_id).metadata)


@pytest.mark.usefixtures("awa_db")
def test_a_step_without_dependencies_is_written_once_into_the_ready_ring():
    tables = ("deferred_jobs", "workflow_steps", "ready_entries")
    with transaction.atomic():
        before = {t: table_counts(t) for t in tables}
        run = awa.chord([awa.call(add, x=n) for n in range(10)], collect).enqueue()
        written = {t: delta(before[t], table_counts(t))[:3] for t in tables}
    # (inserted, updated, deleted): the callback alone is held; the ten roots are one ready row
    # and one step row each, never updated (the detour wrote 3 and updated 1 more per root).
    assert written["deferred_jobs"] == (1, 0, 0)
    assert written["workflow_steps"] == (11, 0, 0)
    assert written["ready_entries"] == (10, 0, 0)
    assert awa.get_job(run.job_ids["1"]).state == "available"
    assert awa.get_job(run.job_ids["callback"]).state == "held"
    assert awa.get_workflow(run.workflow_id).counts == {"released": 10, "held": 1}
    root = awa.get_job(run.job_ids["1"]).metadata["awa:workflow"]
    assert root["inputs"] == {} and root["after"] == [] and root["step"] == "1"


def index_scans(table: str) -> int:
    """Index scans of awa.<table> so far in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables WHERE relid = %s::regclass",
            [f"awa.{table}"],
        )
        return int(cursor.fetchone()[0])


@pytest.mark.usefixtures("awa_db")
def test_the_enqueue_checks_no_step_and_no_edge_against_another_row():
    # No foreign key checks each step's workflow and each edge's step, a lookup per row.
    tables = ("workflows", "workflow_steps")
    with transaction.atomic():
        before = {t: index_scans(t) for t in tables}
        awa.chord([awa.call(add, x=n) for n in range(10)], collect).enqueue()
        scans = {t: index_scans(t) - before[t] for t in tables}
    assert scans == {"workflows": 0, "workflow_steps": 0}


@pytest.mark.usefixtures("awa_db")
@pytest.mark.parametrize("handler", [collect, acollect], ids=["sync", "async"])
def test_a_wide_fan_in_reads_its_inputs_when_it_runs_in_order_and_complete(handler):
    assert copied_limit() < WIDE
    run = awa.chord([awa.call(add, x=n) for n in range(WIDE)], handler).enqueue()
    members = [run.job_ids[str(n)] for n in range(1, WIDE + 1)]
    for job_id in members[:-1]:
        work_one(job_id)
    with transaction.atomic():
        before = table_counts("workflow_steps")
        work_one(members[-1])
        steps = delta(before, table_counts("workflow_steps"))
    # The release of the callback reads its own row and the last member's, not the WIDE rows
    # an aggregate of their results read (nor writes more than those two).
    assert steps[3] < 20, steps
    assert steps[1] <= 3, steps
    callback = awa.get_job(run.job_ids["callback"])
    assert callback.state == "available"
    entry = callback.metadata["awa:workflow"]
    assert entry["inputs_read"] is True and "inputs" not in entry and "after" not in entry
    assert len(job_metadata(run.job_ids["callback"])) < 500
    run_jobs()
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "completed"
    assert state.step("callback").result == list(range(WIDE))


@pytest.mark.usefixtures("awa_db")
def test_a_narrow_fan_in_keeps_its_inputs_copied_into_its_row():
    run = awa.chord([awa.call(add, x=n) for n in range(3)], collect).enqueue()
    run_jobs()
    entry = awa.get_job(run.job_ids["callback"]).metadata["awa:workflow"]
    assert entry["after"] == ["1", "2", "3"]
    assert entry["inputs"]["2"] == {"state": "completed", "result": 1, "error": None}
    assert awa.get_workflow(run.workflow_id).step("callback").result == [0, 1, 2]


@pytest.mark.usefixtures("awa_db")
def test_a_fan_out_grown_wide_at_run_time_reads_every_added_result():
    # A fan-out sized at run time turns a narrow fan-in wide: its release flags it, and the
    # results it reads are the adding step's, then the added ones', in order.
    count = copied_limit() + 10
    run = (
        awa.Workflow("grow")
        .step("split", split, args={"parts": count})
        .step("report", collect, after=["split"])
        .enqueue()
    )
    run_jobs()
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "completed", state.counts
    entry = awa.get_job(run.job_ids["report"]).metadata["awa:workflow"]
    assert entry.get("inputs_read") is True
    assert state.step("report").result == [0, *(n * 10 for n in range(1, count + 1))]


def test_a_wide_fan_in_reads_its_inputs_in_a_worker_process(worker_process):
    worker_process(env=WORKER_ENV).wait_ready()
    for handler in (collect, acollect):
        run = awa.chord([awa.call(add, x=n) for n in range(WIDE)], handler).enqueue()
        state = awa.wait_workflow(run.workflow_id, timeout=60)
        assert state.state == "completed", state.counts
        assert state.step("callback").result == list(range(WIDE))


@pytest.mark.usefixtures("awa_db")
def test_the_spec_text_carries_every_option_of_a_root_and_of_a_held_step():
    # Built as text from pieces (not one json.dumps): names that need escaping, options,
    # metadata and tags arrive as given, for a step written ready and one written held.
    first, second = 'fetch "ü"\\', "parse ☃"
    options = {
        "queue": "email",
        "priority": 3,
        "max_attempts": 7,
        "metadata": {"k": ["v", 1], "é": None},
        "tags": ["a", 'b"c'],
    }
    run = (
        awa.Workflow('name "quoted" ☃')
        .step(first, add, args={"x": 5}, **options)
        .step(second, add, args={"x": 1}, after=[first], ignore=[first], **options)
        .enqueue()
    )
    state = awa.get_workflow(run.workflow_id)
    assert state.workflow.name == 'name "quoted" ☃'
    assert [s.name for s in state.steps] == [first, second]
    assert state.step(second).after == (first,)
    for name, wanted_state in ((first, "available"), (second, "held")):
        job = awa.get_job(run.job_ids[name])
        assert job.state == wanted_state
        assert (job.queue, job.priority, job.max_attempts) == ("email", 3, 7)
        assert job.tags == ["a", 'b"c']
        assert {k: v for k, v in job.metadata.items() if k != "awa:workflow"} == {
            "k": ["v", 1],
            "é": None,
        }
        assert job.metadata["awa:workflow"]["step"] == name
    assert awa.get_job(run.job_ids[first]).args == {"x": 5}
    run_jobs(queue="email")
    state = awa.get_workflow(run.workflow_id)
    assert state.state == "completed"
    assert state.results == {first: 5, second: 6}


@pytest.mark.usefixtures("awa_db")
def test_a_workflow_resolves_each_distinct_job_and_options_once(monkeypatch):
    # A group's members share their job and options: resolved once for all of them, not once
    # per step (#34). Steps whose options differ, or hold a list (tags), get their own.
    calls: list[str] = []
    resolve = EnqueueOptions.resolve

    def counted(self: EnqueueOptions, kind: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(kind)
        return resolve(self, kind, *args, **kwargs)

    monkeypatch.setattr(EnqueueOptions, "resolve", counted)
    workflow = awa.chord([awa.call(add, x=n) for n in range(40)], collect)
    for n in range(3):
        workflow = workflow.step(f"urgent-{n}", add, args={"x": n}, priority=1)
    for n in range(2):
        workflow = workflow.step(f"tagged-{n}", add, args={"x": n}, tags=[f"t{n}"])
    run = workflow.enqueue()
    assert sorted(calls) == ["wf.add", "wf.add", "wf.add", "wf.add", "wf.collect"]
    # Each step still stored with its own options and arguments.
    assert [awa.get_job(run.job_ids[str(n)]).args for n in (1, 40)] == [{"x": 0}, {"x": 39}]
    assert {awa.get_job(run.job_ids[str(n)]).priority for n in range(1, 41)} == {2}
    assert {awa.get_job(run.job_ids[f"urgent-{n}"]).priority for n in range(3)} == {1}
    assert [awa.get_job(run.job_ids[f"tagged-{n}"]).tags for n in range(2)] == [["t0"], ["t1"]]
    assert awa.get_job(run.job_ids["callback"]).kind == "wf.collect"


@pytest.mark.usefixtures("awa_db")
def test_a_workflow_captures_the_trace_context_once_for_all_its_steps(monkeypatch):
    telemetry = get_telemetry()
    inject = type(telemetry).inject
    calls: list[int] = []

    def counted(self: Any, metadata: Any) -> None:
        calls.append(1)
        inject(self, metadata)

    monkeypatch.setattr(type(telemetry), "inject", counted)
    awa.chord([awa.call(add, x=n) for n in range(40)], collect).enqueue()
    assert len(calls) == 1
    awa.enqueue(add, args={"x": 1})  # a plain enqueue still captures its own
    assert len(calls) == 2


@pytest.mark.usefixtures("awa_db")
@pytest.mark.parametrize("option", ["priority", "max_attempts"])
@pytest.mark.parametrize("bad", [True, 1.0], ids=["bool", "float"])
def test_options_equal_to_a_resolved_step_s_are_still_checked(option: str, bad: object):
    # True and 1.0 equal 1 (and hash alike): sharing the first step's resolution would let
    # them through, where a step of their own is refused.
    workflow = awa.Workflow().step("good", add, args={"x": 1}, **{option: 1})
    with pytest.raises(InvalidJob) as refused:
        workflow.step("bad", add, args={"x": 2}, **{option: bad}).enqueue()
    assert refused.value.field == f"steps.bad.{option}"
