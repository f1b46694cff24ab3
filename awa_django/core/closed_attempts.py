"""Counting and announcing closed attempts: telemetry and the outcome signals, the same for the
worker's completions, the leader's rescues and external callbacks.
"""

from __future__ import annotations

import json
from typing import Any, Final

from django.dispatch import Signal

from awa_django import signals
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.declarations.jobs import DeclaredJob
from awa_django.storage.execution import Closed
from awa_django.storage.workflows import FinishedWorkflow
from awa_django.telemetry import get_telemetry

_OUTCOME_SIGNALS: dict[Outcome, Signal] = {
    Outcome.COMPLETED: signals.job_completed,
    Outcome.RETRYABLE: signals.job_retried,
    Outcome.SNOOZED: signals.job_snoozed,
    Outcome.FAILED: signals.job_failed,
    Outcome.CANCELLED: signals.job_cancelled,
}
_SIGNALS: Final = tuple(_OUTCOME_SIGNALS.values())


def _signal_kwargs(completion: Completion, closed: Closed) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "job_id": completion.job_id,
        "run_lease": completion.run_lease,
        "kind": completion.kind,
        "queue": completion.queue,
        "attempt": completion.attempt,
    }
    if completion.outcome in (Outcome.RETRYABLE, Outcome.SNOOZED):
        kwargs["run_at"] = closed[(completion.job_id, completion.run_lease)]
    if completion.outcome is Outcome.COMPLETED:
        kwargs["result"] = (
            None if completion.result_json is None else json.loads(completion.result_json)
        )
    elif completion.outcome is Outcome.CANCELLED:
        kwargs["reason"] = (completion.error or {}).get("reason", "")
    elif completion.outcome in (Outcome.RETRYABLE, Outcome.FAILED):
        kwargs["error"] = completion.error
    return kwargs


async def report_closed(
    completions: list[Completion], closed: Closed, *, rescue_reasons: dict[int, str]
) -> None:
    """Count and announce the attempts of ``completions`` that actually ``closed`` (written,
    hence committed: worker writes are autocommit). ``rescue_reasons`` maps the job ids the
    leader rescued to why; stale completions are never reported."""
    written = [c for c in completions if (c.job_id, c.run_lease) in closed]
    get_telemetry().closed(written, rescued=rescue_reasons.keys())
    # Nearly always nothing to announce (no rescue, no receiver connected): asked once per
    # batch then, not once per attempt.
    if rescue_reasons or any([signal.receivers for signal in _SIGNALS]):
        for completion in written:
            reason = rescue_reasons.get(completion.job_id)
            if reason is not None and signals.job_rescued.has_listeners():
                await signals.send_robust(
                    signals.job_rescued,
                    sender=DeclaredJob,
                    **_signal_kwargs(completion, closed) | {"reason": reason},
                    outcome=completion.outcome.value,
                )
            signal = _OUTCOME_SIGNALS.get(completion.outcome)
            if signal is not None and signal.receivers and signal.has_listeners():
                await signals.send_robust(
                    signal, sender=DeclaredJob, **_signal_kwargs(completion, closed)
                )
    await report_finished(closed.finished)


async def report_finished(finished: list[FinishedWorkflow]) -> None:
    """Send ``workflow_finished`` for the workflows a committed close finished."""
    if (
        finished
        and signals.workflow_finished.receivers
        and signals.workflow_finished.has_listeners()
    ):
        for workflow in finished:
            await signals.send_robust(
                signals.workflow_finished,
                sender=DeclaredJob,
                workflow_id=workflow.workflow_id,
                name=workflow.name,
                state=workflow.state,
            )
