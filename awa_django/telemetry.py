"""OpenTelemetry metrics and traces, behind one small API the hot path calls.

``get_telemetry()`` is built once per process: an ``OtelTelemetry`` when ``opentelemetry-api``
is importable (the ``otel`` extra), otherwise a ``Telemetry`` whose methods do nothing, so a
process without the extra pays one empty method call per event. The instruments come from the
global meter and tracer providers; the application configures an SDK (exporters, readers) the
usual way, and until it does the API's own no-op providers are in place.

Traces: ``inject`` stores the enqueue site's W3C trace context in the job's metadata under
``awa:traceparent`` (only when a span is active), and ``job_span`` runs the handler inside a
``job.execute <kind>`` span whose parent is that stored context, so a view's trace continues
into its job. Names are tabled in ``docs/observability.md``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, MutableMapping
from datetime import datetime
from typing import Any, Final

from awa_django.storage.execution import Completion, Outcome
from awa_django.storage.queue import ClaimedJob

TRACEPARENT_KEY: Final = "awa:traceparent"
INSTRUMENTATION_NAME: Final = "awa_django"

_OUTCOME_COUNTERS: Final = {
    Outcome.COMPLETED: "awa.job.completed",
    Outcome.RETRYABLE: "awa.job.retried",
    Outcome.FAILED: "awa.job.failed",
    Outcome.CANCELLED: "awa.job.cancelled",
}


class JobSpan:
    """What the worker reports about a running handler; the no-op version ignores it."""

    def failed(self, exc: BaseException) -> None:
        """The handler raised ``exc`` (not an outcome like ``Snooze``)."""


_NOOP_SPAN: Final = JobSpan()


class Telemetry:
    """The no-op telemetry: used when opentelemetry is not installed."""

    enabled = False

    def enqueued(self, *, kind: str, queue: str, count: int = 1) -> None:
        """``count`` jobs of ``kind`` committed to ``queue``."""

    def inject(self, metadata: MutableMapping[str, Any]) -> None:
        """Store the active trace context in ``metadata`` (nothing when no span is active)."""

    def claimed(self, job: ClaimedJob, *, now: datetime) -> None:
        """``job`` was claimed at ``now``: counts it, its pickup latency and one in flight."""

    def finished(self, job: ClaimedJob, *, duration_s: float) -> None:
        """``job``'s handler returned after ``duration_s``; one fewer in flight."""

    def closed(self, completion: Completion, *, rescued: bool = False) -> None:
        """An attempt closed in storage (stale completions are never reported)."""

    def cancelled(self, *, kind: str, queue: str) -> None:
        """``awa.cancel`` cancelled a job (committed)."""

    def promoted(self, count: int) -> None:
        """The promoter moved ``count`` deferred jobs to the ready ring."""

    def ring_pass(self, *, rotations: int, prunes: int) -> None:
        """A ring maintenance pass rotated and pruned that many slots."""

    @contextlib.contextmanager
    def job_span(self, job: ClaimedJob) -> Iterator[JobSpan]:
        """Run the handler of ``job`` inside this context manager."""
        yield _NOOP_SPAN


class _OtelJobSpan(JobSpan):
    __slots__ = ("_span",)

    def __init__(self, span: Any) -> None:
        self._span = span

    def failed(self, exc: BaseException) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.record_exception(exc)
        self._span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


class OtelTelemetry(Telemetry):
    """Telemetry on the global OpenTelemetry meter and tracer providers."""

    enabled = True

    def __init__(self) -> None:
        from opentelemetry import metrics, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        # The API's proxy meter and tracer forward to whatever SDK the application installs,
        # even later than this constructor.
        meter = metrics.get_meter(INSTRUMENTATION_NAME)
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME)
        self._trace = trace
        self._propagator = TraceContextTextMapPropagator()
        self._counters = {
            name: meter.create_counter(name, unit="{job}")
            for name in (
                "awa.job.enqueued",
                "awa.job.claimed",
                "awa.job.completed",
                "awa.job.retried",
                "awa.job.failed",
                "awa.job.cancelled",
                "awa.job.rescued",
            )
        }
        self._duration = meter.create_histogram(
            "awa.job.duration", unit="s", description="Handler run time"
        )
        self._wait = meter.create_histogram(
            "awa.job.wait", unit="s", description="Pickup latency: claim time minus run_at"
        )
        self._in_flight = meter.create_up_down_counter("awa.job.in_flight", unit="{job}")
        self._promoted = meter.create_counter("awa.maintenance.promoted", unit="{job}")
        self._rotations = meter.create_counter("awa.ring.rotations", unit="{rotation}")
        self._prunes = meter.create_counter("awa.ring.prunes", unit="{prune}")

    def enqueued(self, *, kind: str, queue: str, count: int = 1) -> None:
        self._counters["awa.job.enqueued"].add(count, {"queue": queue, "kind": kind})

    def inject(self, metadata: MutableMapping[str, Any]) -> None:
        if not self._trace.get_current_span().get_span_context().is_valid:
            return
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        if "traceparent" in carrier:
            metadata[TRACEPARENT_KEY] = carrier["traceparent"]

    def claimed(self, job: ClaimedJob, *, now: datetime) -> None:
        attributes = {"queue": job.queue, "kind": job.kind}
        self._counters["awa.job.claimed"].add(1, attributes)
        self._wait.record(max((now - job.run_at).total_seconds(), 0.0), attributes)
        self._in_flight.add(1, {"queue": job.queue})

    def finished(self, job: ClaimedJob, *, duration_s: float) -> None:
        self._duration.record(duration_s, {"queue": job.queue, "kind": job.kind})
        self._in_flight.add(-1, {"queue": job.queue})

    def closed(self, completion: Completion, *, rescued: bool = False) -> None:
        attributes = {"queue": completion.queue, "kind": completion.kind}
        if rescued:
            self._counters["awa.job.rescued"].add(1, attributes)
        name = _OUTCOME_COUNTERS.get(completion.outcome)
        if name is not None:
            self._counters[name].add(1, attributes)

    def cancelled(self, *, kind: str, queue: str) -> None:
        self._counters["awa.job.cancelled"].add(1, {"queue": queue, "kind": kind})

    def promoted(self, count: int) -> None:
        if count:
            self._promoted.add(count)

    def ring_pass(self, *, rotations: int, prunes: int) -> None:
        if rotations:
            self._rotations.add(rotations)
        if prunes:
            self._prunes.add(prunes)

    @contextlib.contextmanager
    def job_span(self, job: ClaimedJob) -> Iterator[JobSpan]:
        traceparent = job.metadata.get(TRACEPARENT_KEY)
        parent = (
            self._propagator.extract({"traceparent": traceparent})
            if isinstance(traceparent, str)
            else None
        )
        with self._tracer.start_as_current_span(
            f"job.execute {job.kind}",
            context=parent,
            kind=self._trace.SpanKind.CONSUMER,
            attributes={
                "awa.job.id": job.job_id,
                "awa.job.kind": job.kind,
                "awa.job.queue": job.queue,
                "awa.job.attempt": job.attempt,
                "awa.job.run_lease": job.run_lease,
            },
            # Handler failures are reported through ``failed``; outcomes like Snooze are not.
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield _OtelJobSpan(span)


@functools.cache
def get_telemetry() -> Telemetry:
    """This process's telemetry, built once (``get_telemetry.cache_clear()`` rebuilds it)."""
    try:
        return OtelTelemetry()
    except ImportError:
        return Telemetry()
