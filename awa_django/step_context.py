"""What a workflow step knows of its workflow while it runs (``ctx.workflow``).

Read from the step's own metadata, where the transaction that released the step wrote the
state, result and error of each step it reads (``awa.workflow_release``): a handler reaches
its inputs without a query of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

# The metadata key that marks a workflow step (written by awa.workflow_create).
WORKFLOW_KEY: Final = "awa:workflow"


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

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> StepContext | None:
        """The step context in a job's metadata, or None for a job that is not a step."""
        entry = metadata.get(WORKFLOW_KEY)
        if not isinstance(entry, Mapping):
            return None
        return cls(
            workflow_id=int(entry["id"]),
            workflow_name=str(entry.get("name", "")),
            step=str(entry["step"]),
            after=tuple(entry.get("after") or ()),
            inputs=dict(entry.get("inputs") or {}),
        )

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
