"""The worker builds each attempt's ``JobContext`` through ``AttemptContext`` (#32): cheaper than
the frozen dataclass's constructor, and what it returns is a ``JobContext`` that behaves exactly
like one built by the public constructor."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from datetime import UTC, datetime
from typing import Any

import pytest

from awa_django.core.claimed_job import ClaimedJob
from awa_django.declarations.jobs import (
    AttemptContext,
    AttemptProgress,
    CancelFlag,
    JobContext,
)
from awa_django.worker.executor import context_for

NOW = datetime(2026, 12, 5, 15, 0, tzinfo=UTC)
CLAIMED = datetime(2026, 12, 5, 15, 1, tzinfo=UTC)
# The fields the public constructor fills with a fresh object per context (default factories).
FRESH_FIELDS = {"cancel_flag", "state", "workflow_added", "workflow_inputs"}


def claimed(**changes: Any) -> ClaimedJob:
    values: dict[str, Any] = dict(
        queue="default", priority=2, shard=0, lane_seq=1, ready_slot=0, job_id=7,
        kind="tests.noop", args={"n": 1}, attempt=4, run_lease=3, max_attempts=5, run_at=NOW,
        created_at=NOW, metadata={"m": [1]}, tags=["a", "b"], errors=[], claimed_at=CLAIMED,
        progress={"percent": 50, "message": ""}, checkpoint={"at": 4},
    )  # fmt: skip
    values.update(changes)
    return ClaimedJob(**values)


def public_twin(ctx: JobContext) -> JobContext:
    """The same context, built by the public constructor from its fields."""
    return JobContext(**{f.name: getattr(ctx, f.name) for f in dataclasses.fields(JobContext)})


def test_a_worker_built_context_is_a_job_context_equal_to_the_public_constructor_s() -> None:
    ctx = context_for(claimed(), claimed_by="worker-1")
    assert type(ctx) is JobContext
    twin = public_twin(ctx)
    assert ctx == twin and twin == ctx
    assert repr(ctx) == repr(twin)
    assert ctx != dataclasses.replace(twin, attempt=3)
    assert (ctx.job_id, ctx.kind, ctx.queue, ctx.priority, ctx.attempt) == (
        7, "tests.noop", "default", 2, 4,
    )  # fmt: skip
    assert (ctx.max_attempts, ctx.run_lease, ctx.args, ctx.metadata, ctx.tags) == (
        5, 3, {"n": 1}, {"m": [1]}, ("a", "b"),
    )  # fmt: skip
    assert (ctx.created_at, ctx.claimed_by, ctx.claimed_at) == (NOW, "worker-1", CLAIMED)
    assert (ctx.progress, ctx.checkpoint) == ({"percent": 50, "message": ""}, {"at": 4})
    assert ctx.callbacks is None and ctx.add_step is not None
    assert ctx.read_workflow_inputs is not None
    # The public constructor's defaults, fresh: nothing raised, nothing added.
    defaults = JobContext(
        job_id=1, kind="k", queue="q", priority=2, attempt=1, max_attempts=1, run_lease=1,
        args={}, metadata={}, tags=(), created_at=NOW,
    )  # fmt: skip
    assert type(ctx.cancel_flag) is type(defaults.cancel_flag) is CancelFlag
    assert ctx.cancel_flag.raised is defaults.cancel_flag.raised is False
    assert not ctx.is_cancelled()
    assert ctx.workflow_added == defaults.workflow_added == []
    assert ctx.workflow_inputs == defaults.workflow_inputs == []
    assert type(ctx.state) is AttemptProgress
    # A copy and a replace are JobContexts too.
    assert copy.copy(ctx) == ctx
    assert type(dataclasses.replace(ctx, attempt=3)) is JobContext


def test_the_worker_s_constructor_takes_every_other_field_in_order() -> None:
    # A field added to JobContext and not to AttemptContext would be left unset; its positional
    # parameters follow the fields' order.
    parameters = list(inspect.signature(AttemptContext).parameters)
    fields = [f.name for f in dataclasses.fields(JobContext)]
    assert parameters == [name for name in fields if name not in FRESH_FIELDS - {"state"}]
    ctx = context_for(claimed(), claimed_by=None)
    for name in fields:
        getattr(ctx, name)


def test_a_worker_built_context_is_frozen() -> None:
    ctx = context_for(claimed())
    for f in dataclasses.fields(JobContext):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(ctx, f.name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(ctx, f.name)
    with pytest.raises((AttributeError, TypeError)):
        ctx.other = 1  # type: ignore[attr-defined]
    assert ctx.job_id == 7


def test_each_attempt_s_context_has_its_own_mutable_state() -> None:
    job = claimed()
    first, second = context_for(job), context_for(job)
    for name in FRESH_FIELDS:
        assert getattr(first, name) is not getattr(second, name), name
    first.cancel_flag.set()
    first.set_progress(10, "half", checkpoint={"at": 9})
    first.workflow_added.append({"step": "x"})
    first.workflow_inputs.append(((), {}))
    assert first.is_cancelled() and not second.is_cancelled()
    assert first.progress == {"percent": 10, "message": "half"}
    assert second.progress == {"percent": 50, "message": ""}
    assert second.checkpoint == {"at": 4}
    assert second.workflow_added == [] and second.workflow_inputs == []


def test_the_worker_s_constructor_skips_the_frozen_dataclass_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The frozen dataclass's generated __init__ sets each field through object.__setattr__ and
    # calls each default factory; the worker's constructor stores the slots directly. (Not
    # counted with cProfile: in a process where a test interrupted a thread, test_interrupt.py,
    # profiling never ends on 3.11.)
    constructed: list[dict[str, Any]] = []
    public_init = JobContext.__init__

    def counted_init(self: JobContext, **fields: Any) -> None:
        constructed.append(fields)
        public_init(self, **fields)

    monkeypatch.setattr(JobContext, "__init__", counted_init)
    ctx = context_for(claimed(), claimed_by="worker-1")
    assert constructed == []
    assert public_twin(ctx) == ctx and len(constructed) == 1
