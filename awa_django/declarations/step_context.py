"""What a workflow step knows of its workflow while it runs (``ctx.workflow``).

Read from the step's own metadata, where the transaction that released the step wrote the
state, result and error of each step it reads (``awa.workflow_release``): a handler reaches
its inputs without a query of its own. A step with many dependencies (a wide chord's callback,
flagged ``inputs_read``) reads them with one query when it runs instead, so that the release
does not aggregate every member's result into its row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from awa_django.job_record import WORKFLOW_KEY

# Separates a step added while its workflow runs from the step that added it ("split/part-1");
# the names a workflow is built with cannot hold it.
ADDED_STEP_SEPARATOR: Final = "/"

# Validates a step added at run time and returns its description
# (``declarations.workflow_steps.added_step_spec``, which the worker gives each attempt's
# context: that module imports the job declarations, which import this one).
StepSpec = Callable[
    [str, object, Mapping[str, Any] | None, Sequence[str], Mapping[str, Any]], dict[str, Any]
]

# A flagged step's dependencies in order and their {state, result, error}, read from the
# database by whatever runs the attempt (once per attempt).
StepInputs = tuple[tuple[str, ...], Mapping[str, Mapping[str, Any]]]
StoredInputs = Callable[[], StepInputs]
# What reads them, given the workflow id and the step's name (set by the runner).
StepInputsReader = Callable[[int, str], StepInputs]


@dataclass(frozen=True, slots=True)
class StepContext:
    """A running step's view of its workflow.

    ``inputs`` maps each dependency's name (for an ``on_failure`` step: each step that did not
    complete) to ``{"state", "result", "error"}``."""

    workflow_id: int
    workflow_name: str
    step: str
    after: tuple[str, ...]
    inputs: Mapping[str, Mapping[str, Any]]
    # Steps this attempt added (``add``), written with its completion; shared with the
    # attempt's JobContext, so every ``ctx.workflow`` of one attempt adds to the same list.
    added: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)
    # What validates ``add``; None where nothing runs the attempt (a context built by hand).
    add_spec: StepSpec | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        metadata: Mapping[str, Any],
        added: list[dict[str, Any]] | None = None,
        add_spec: StepSpec | None = None,
        stored_inputs: StoredInputs | None = None,
    ) -> StepContext | None:
        """The step context in a job's metadata, or None for a job that is not a step."""
        entry = metadata.get(WORKFLOW_KEY)
        if not isinstance(entry, Mapping):
            return None
        if entry.get("inputs_read"):
            if stored_inputs is None:
                raise RuntimeError(
                    "ctx.workflow of a step with many dependencies reads them from the "
                    "database: the step must run in a worker or run_jobs"
                )
            after, inputs = stored_inputs()
        else:
            after, inputs = tuple(entry.get("after") or ()), entry.get("inputs") or {}
        return cls(
            workflow_id=int(entry["id"]),
            workflow_name=str(entry.get("name", "")),
            step=str(entry["step"]),
            after=after,
            inputs=dict(inputs),
            added=[] if added is None else added,
            add_spec=add_spec,
        )

    def add(
        self,
        name: str,
        job: object,
        /,
        *,
        args: Mapping[str, Any] | None = None,
        after: Sequence[str] = (),
        **options: Any,
    ) -> str:
        """Add a step to this workflow while this step runs (a fan-out sized at run time). It
        is written when this step completes, in the transaction of its completion, and never
        if it does not complete. The new step, named ``"<this step>/<name>"`` (returned), runs
        after this step and after the steps named in ``after`` (steps this one added before);
        every step that waits for this one waits for it too, and reads its result after this
        step's in ``result_list``. Validated here like a step of ``Workflow``: ``InvalidJob``
        naming it fails this attempt."""
        if self.add_spec is None:
            raise RuntimeError("ctx.workflow.add needs the step to run in a worker or run_jobs")
        full = f"{self.step}{ADDED_STEP_SEPARATOR}{name}"
        known = {spec["name"] for spec in self.added}
        deps = [f"{self.step}{ADDED_STEP_SEPARATOR}{dep}" for dep in after]
        spec = self.add_spec(full, job, args, deps, {**options, "_known": known})
        self.added.append(spec)
        return full

    @property
    def results(self) -> dict[str, Any]:
        """The results of the dependencies that completed, by step name."""
        return {
            name: given.get("result")
            for name, given in self.inputs.items()
            if given.get("state") == "completed"
        }

    @property
    def errors(self) -> dict[str, Any]:
        """The error of each input step that did not complete (failed, cancelled, or parked in
        the dead-letter queue), by step name: what an ``ignore`` dependency or an
        ``on_failure`` step reads."""
        return {
            name: given.get("error")
            for name, given in self.inputs.items()
            if given.get("state") != "completed"
        }

    @property
    def result_list(self) -> list[Any]:
        """The dependencies' results in the order of ``after`` (a chord's callback: its group's
        results in order); None for one that did not complete."""
        return [self.inputs.get(name, {}).get("result") for name in self.after]

    @property
    def previous(self) -> Any:
        """The result of the first dependency (in a chain, the step before), or None."""
        if not self.after:
            return None
        return self.inputs.get(self.after[0], {}).get("result")
