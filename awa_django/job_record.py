"""The public record of a job (``awa.JobRecord``), as ``awa.get_job`` and the admin read it.

In the base layer, under storage (which reads it, ``storage.jobs``) and beside the exceptions
that carry one (``JobFailed``, ``WaitTimeout``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

# The metadata key that marks a workflow step and holds what it reads of its workflow (written
# by awa.workflow_create and awa.workflow_release; read by the worker's completion, telemetry
# and ``ctx.workflow``).
WORKFLOW_KEY: Final = "awa:workflow"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A job as it stands now. ``errors`` holds one entry per failed attempt, oldest first."""

    job_id: int
    state: str
    kind: str
    queue: str
    priority: int
    args: dict[str, Any]
    attempt: int
    run_lease: int
    max_attempts: int
    run_at: datetime | None
    created_at: datetime
    metadata: dict[str, Any]
    tags: list[str]
    errors: list[dict[str, Any]]
    finalized_at: datetime | None
    # The JSON return value a completed job kept (its handler's return value other than None,
    # or a django.tasks result); None otherwise.
    result: Any = None
