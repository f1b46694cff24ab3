"""``Workflow.step`` costs the same for every step: a new builder shares the steps of the one it
extends instead of copying them, which made building a workflow one step at a time quadratic in
its length. Counted in the bytes the builders of one build hold (each is a workflow that can
still be extended), so the test does not time."""

from __future__ import annotations

import copy
import pickle
import tracemalloc

import awa_django as awa

SHORT = 200


def held_by_builders(steps: int) -> int:
    """The bytes held by the builders of a workflow of ``steps`` steps, every one kept."""
    made = awa.call("wf.add", x=1)
    tracemalloc.start()
    try:
        builders = [awa.Workflow("build")]
        for position in range(steps):
            builders.append(builders[-1].step(str(position), made))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(builders[-1].steps) == steps
    return held


def test_each_step_holds_a_constant_share_of_the_workflow() -> None:
    short, long = held_by_builders(SHORT), held_by_builders(10 * SHORT)
    # Ten times the steps hold about ten times the bytes; copying the steps before each new one
    # held about fifty times as many at these lengths.
    assert long < 20 * short, (short, long)


def test_builders_that_share_steps_stay_apart() -> None:
    base = awa.Workflow("w").step("a", "wf.collect")
    left = base.step("b", "wf.collect", after=["a"])
    right = base.step("c", "wf.collect", after=["a"]).on_failure("f", "wf.collect")
    assert [step.name for step in base.steps] == ["a"]
    assert [step.name for step in left.steps] == ["a", "b"]
    assert [step.name for step in right.steps] == ["a", "c"]
    assert left.failure_step is None and right.failure_step is not None
    assert awa.chord(left, "wf.collect", name="c").name == "c"
    assert [step.name for step in awa.chord(left, "wf.collect").steps] == ["a", "b", "callback"]
    # Compared and shown by their steps, as any frozen value.
    assert left == awa.Workflow("w").step("a", "wf.collect").step("b", "wf.collect", after=["a"])
    assert left != right
    assert "steps=(Step(name='a'" in repr(left)


def test_a_long_workflow_is_copied_and_pickled_whole() -> None:
    workflow = awa.Workflow("long")
    for position in range(10 * SHORT):
        workflow = workflow.step(str(position), "wf.add", args={"x": position})
    assert copy.deepcopy(workflow) == workflow
    assert pickle.loads(pickle.dumps(workflow)) == workflow
    assert copy.copy(workflow).steps == workflow.steps
