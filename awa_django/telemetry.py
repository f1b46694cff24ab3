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

Gauges: the leader's ``QueueSampler`` task hands each pass's per-queue depths to ``queue_depths``;
the observable gauges ``awa.queue.depth`` and ``awa.queue.lag`` report that latest snapshot when
the SDK collects, and nothing once it is older than the publisher said it may be (a process that
lost leadership stops reporting instead of repeating old numbers).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import Counter
from collections.abc import Container, Iterable, Iterator, Mapping, MutableMapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any, Final, Protocol

from awa_django.job_record import WORKFLOW_KEY
from awa_django.logs import JobLike


# This module is in the base layer, under core and storage, which report through it: it names
# the fields it reads of their values instead of importing their classes.
class ClaimedJobFields(JobLike, Protocol):
    """What telemetry reads of a claimed job (``core.claimed_job.ClaimedJob``): what a log
    line names of it, and when it was due."""

    @property
    def run_at(self) -> datetime: ...
    @property
    def metadata(self) -> Mapping[str, Any]: ...


class CompletionFields(JobLike, Protocol):
    """What telemetry reads of a closed attempt (``core.completion.Completion``): what a log
    line names of it, and its outcome."""

    @property
    def outcome(self) -> str: ...


class QueueDepthFields(Protocol):
    """What telemetry reads of a queue's depth (``storage.queue.QueueDepth``)."""

    @property
    def queue(self) -> str: ...
    @property
    def available(self) -> int: ...
    @property
    def scheduled(self) -> int: ...
    @property
    def retryable(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def lag_s(self) -> float: ...
    @property
    def waiting_external(self) -> int: ...


TRACEPARENT_KEY: Final = "awa:traceparent"
# How often, at most, ``job_span`` asks OpenTelemetry whether an SDK tracer provider has been
# installed, until one has. The question reads the environment: asked for every job, it was a
# visible share of the event loop's time in a no-op drain (docs/benchmarks.md, "Why the code is
# shaped as it is").
PROVIDER_CHECK_INTERVAL_S: Final = 1.0
INSTRUMENTATION_NAME: Final = "awa_django"

# Keyed by the outcome's value, which its ``Outcome`` member (a ``str``) finds: core, where
# ``Outcome`` lives, imports this module.
_CLOSED_KEY: Final = attrgetter("outcome", "queue", "kind")
_OUTCOME_COUNTERS: Final = {
    "completed": "awa.job.completed",
    "retryable": "awa.job.retried",
    "failed": "awa.job.failed",
    "cancelled": "awa.job.cancelled",
}


class JobSpan:
    """What the worker reports about a running handler; the no-op version ignores it."""

    def failed(self, exc: BaseException) -> None:
        """The handler raised ``exc`` (not an outcome like ``Snooze``)."""


_NOOP_SPAN: Final = JobSpan()
# Stateless, so one instance serves every job.
_NO_SPAN: Final = contextlib.nullcontext(_NOOP_SPAN)


class Telemetry:
    """The no-op telemetry: used when opentelemetry is not installed."""

    enabled = False

    def enqueued(self, *, kind: str, queue: str, count: int = 1) -> None:
        """``count`` jobs of ``kind`` committed to ``queue``."""

    def inject(self, metadata: MutableMapping[str, Any]) -> None:
        """Store the active trace context in ``metadata`` (nothing when no span is active)."""

    def claimed(self, jobs: Sequence[ClaimedJobFields], *, now: datetime) -> None:
        """One claim's ``jobs``, claimed at ``now``: counts them, their pickup latencies and
        as many in flight. Called before their ``job_span``."""

    def finished(self, job: ClaimedJobFields, *, duration_s: float) -> None:
        """``job``'s handler returned after ``duration_s``; one fewer in flight (called after
        the ``claimed`` that counted the job)."""

    def closed(
        self, completions: Sequence[CompletionFields], *, rescued: Container[int] = ()
    ) -> None:
        """These attempts closed in storage (stale completions are never reported); the jobs
        in ``rescued`` were closed by the leader's rescue."""

    def cancelled(self, *, kind: str, queue: str) -> None:
        """``awa.cancel`` cancelled a job (committed)."""

    def promoted(self, count: int) -> None:
        """The promoter moved ``count`` deferred jobs to the ready ring."""

    def ring_pass(self, *, rotations: int, prunes: int) -> None:
        """A ring maintenance pass rotated and pruned that many slots."""

    def queue_depths(self, depths: Sequence[QueueDepthFields], *, stale_after_s: float) -> None:
        """The leader measured ``depths``; report them for up to ``stale_after_s`` seconds."""

    def job_span(self, job: ClaimedJobFields) -> contextlib.AbstractContextManager[JobSpan]:
        """Run the handler of ``job`` inside this context manager."""
        return _NO_SPAN


class _DepthSnapshot:
    """The latest leader measurement, read by the queue gauges' callbacks."""

    def __init__(self) -> None:
        # (monotonic expiry, depths) in one tuple, swapped whole, so the SDK's collection
        # thread never pairs a new snapshot with an old expiry.
        self._current: tuple[float, tuple[QueueDepthFields, ...]] = (0.0, ())

    def publish(self, depths: Sequence[QueueDepthFields], *, stale_after_s: float) -> None:
        self._current = (time.monotonic() + stale_after_s, tuple(depths))

    def fresh(self) -> tuple[QueueDepthFields, ...]:
        until, depths = self._current
        return depths if time.monotonic() < until else ()


_SNAPSHOT: Final = _DepthSnapshot()


def _observe_depth(options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    for depth in _SNAPSHOT.fresh():
        for state in ("available", "scheduled", "retryable", "running"):
            yield Observation(getattr(depth, state), {"queue": depth.queue, "state": state})


def _observe_lag(options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    for depth in _SNAPSHOT.fresh():
        yield Observation(depth.lag_s, {"queue": depth.queue})


# Attempts this process has claimed and not yet finished, per queue, for the in-flight gauge.
# Only the event loop's thread writes it; the SDK's collection reads a copy (copying a dict is
# one step under the GIL). A queue stays once seen, so the gauge reports it back at zero.
_IN_FLIGHT: Final[dict[str, int]] = {}


def _observe_in_flight(options: Any) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    for queue, count in list(_IN_FLIGHT.items()):
        yield Observation(count, {"queue": queue})


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
        self._tracing = False
        self._next_provider_check = 0.0  # monotonic time of the next provider check
        self._metrics = metrics
        # The API's placeholder until an SDK meter provider is set, which has no public name;
        # should a release rename it, every histogram value is recorded, as without the check.
        from opentelemetry.metrics import _internal as metrics_internal

        self._proxy_meter_provider: type | None = getattr(
            metrics_internal, "_ProxyMeterProvider", None
        )
        # Whether an SDK meter provider is installed (see _check_meter_provider).
        self._metering = False
        self._next_meter_check = 0.0  # monotonic time of the next meter provider check
        self._check_meter_provider()
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
        # Observed, not counted per job: with an SDK installed, every synchronous instrument
        # call is as costly as ``claimed`` says.
        meter.create_observable_up_down_counter(
            "awa.job.in_flight",
            callbacks=[_observe_in_flight],
            unit="{job}",
            description="Attempts this process is running, per queue",
        )
        self._promoted = meter.create_counter("awa.maintenance.promoted", unit="{job}")
        self._rotations = meter.create_counter("awa.ring.rotations", unit="{rotation}")
        self._prunes = meter.create_counter("awa.ring.prunes", unit="{prune}")
        # The callbacks are module functions: the SDK keeps the first registration of a name,
        # so callbacks bound to this instance would go stale when the cache is rebuilt.
        meter.create_observable_gauge(
            "awa.queue.depth",
            callbacks=[_observe_depth],
            unit="{job}",
            description="Jobs per queue and state, measured by the maintenance leader",
        )
        meter.create_observable_gauge(
            "awa.queue.lag",
            callbacks=[_observe_lag],
            unit="s",
            description="Age of the oldest waiting job's run_at, per queue",
        )

    def enqueued(self, *, kind: str, queue: str, count: int = 1) -> None:
        self._counters["awa.job.enqueued"].add(count, {"queue": queue, "kind": kind})

    def inject(self, metadata: MutableMapping[str, Any]) -> None:
        if not self._trace.get_current_span().get_span_context().is_valid:
            return
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        if "traceparent" in carrier:
            metadata[TRACEPARENT_KEY] = carrier["traceparent"]

    # Counters are added once per claim or completion batch and kind, not once per job: with an
    # SDK meter provider installed each instrument call is costly, and the six calls per job
    # this used to make cost as much as the rest of the worker's work on a job
    # (docs/benchmarks.md). The histograms still take one value per job once an SDK meter
    # provider is installed (``_check_meter_provider``).
    def claimed(self, jobs: Sequence[ClaimedJobFields], *, now: datetime) -> None:
        counts: Counter[tuple[str, str]] = Counter()
        metering = self._check_meter_provider()
        # The tracer provider too, for the batch's job spans (``job_span``), not once per job.
        self._tracing_installed()
        for job in jobs:
            counts[job.queue, job.kind] += 1
            if metering:
                self._wait.record(
                    max((now - job.run_at).total_seconds(), 0.0),
                    {"queue": job.queue, "kind": job.kind},
                )
        for (queue, kind), count in counts.items():
            self._counters["awa.job.claimed"].add(count, {"queue": queue, "kind": kind})
            # Once per queue and kind, not once per job.
            _IN_FLIGHT[queue] = _IN_FLIGHT.get(queue, 0) + count

    def finished(self, job: ClaimedJobFields, *, duration_s: float) -> None:
        # The flag ``claimed`` refreshed for this job's batch: no check per job.
        if self._metering:
            self._duration.record(duration_s, {"queue": job.queue, "kind": job.kind})
        # ``claimed`` counted the job in: its queue is there.
        _IN_FLIGHT[job.queue] -= 1

    def closed(
        self, completions: Sequence[CompletionFields], *, rescued: Container[int] = ()
    ) -> None:
        counts: Counter[tuple[str, str, str]] = Counter()
        # Counted by outcome, queue and kind first, without a Python call per attempt, then
        # named: one counter add per name, queue and kind, as ever.
        for (outcome, queue, kind), count in Counter(map(_CLOSED_KEY, completions)).items():
            name = _OUTCOME_COUNTERS.get(outcome)
            if name is not None:
                counts[name, queue, kind] += count
        if rescued:
            for completion in completions:
                if completion.job_id in rescued:
                    counts["awa.job.rescued", completion.queue, completion.kind] += 1
        for (name, queue, kind), count in counts.items():
            self._counters[name].add(count, {"queue": queue, "kind": kind})

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

    def queue_depths(self, depths: Sequence[QueueDepthFields], *, stale_after_s: float) -> None:
        _SNAPSHOT.publish(depths, stale_after_s=stale_after_s)

    def job_span(self, job: ClaimedJobFields) -> contextlib.AbstractContextManager[JobSpan]:
        # The flag ``claimed`` refreshed for this job's batch: no check per job.
        return self._span(job) if self._tracing else _NO_SPAN

    def _check_meter_provider(self) -> bool:
        """Whether an SDK meter provider is installed, checked once per claimed batch at most
        every PROVIDER_CHECK_INTERVAL_S. Until one is, the API's proxy histograms drop every
        value; recording none saves building the attributes and two calls per job. Counters
        are added as ever: once per batch, and the proxy hands them to a provider installed
        later."""
        if not self._metering:
            now = time.monotonic()
            if now >= self._next_meter_check:
                self._next_meter_check = now + PROVIDER_CHECK_INTERVAL_S
                proxy = self._proxy_meter_provider
                provider = self._metrics.get_meter_provider()
                self._metering = proxy is None or not isinstance(provider, proxy)
        return self._metering

    def _tracing_installed(self) -> bool:
        # Until an SDK tracer provider is installed, the API's proxy only makes non-recording
        # spans; skipping them saves a context attach and detach per job, a visible share of a
        # no-op drain's event loop (docs/benchmarks.md). A provider is set once and for all, so
        # True is kept; one installed after the worker started is picked up by the first claim
        # PROVIDER_CHECK_INTERVAL_S after the last check (``claimed``).
        if not self._tracing:
            now = time.monotonic()
            if now >= self._next_provider_check:
                self._next_provider_check = now + PROVIDER_CHECK_INTERVAL_S
                provider = self._trace.get_tracer_provider()
                self._tracing = not isinstance(provider, self._trace.ProxyTracerProvider)
        return self._tracing

    @contextlib.contextmanager
    def _span(self, job: ClaimedJobFields) -> Iterator[JobSpan]:
        traceparent = job.metadata.get(TRACEPARENT_KEY)
        parent = (
            self._propagator.extract({"traceparent": traceparent})
            if isinstance(traceparent, str)
            else None
        )
        attributes: dict[str, str | int] = {
            "awa.job.id": job.job_id,
            "awa.job.kind": job.kind,
            "awa.job.queue": job.queue,
            "awa.job.attempt": job.attempt,
            "awa.job.run_lease": job.run_lease,
        }
        step = job.metadata.get(WORKFLOW_KEY)
        if isinstance(step, dict):
            # A workflow step: its span names the workflow (docs/workflows.md); the steps of
            # one workflow share the trace of the code that enqueued it.
            attributes["awa.workflow.id"] = int(step.get("id", 0))
            attributes["awa.workflow.step"] = str(step.get("step", ""))
        with self._tracer.start_as_current_span(
            f"job.execute {job.kind}",
            context=parent,
            kind=self._trace.SpanKind.CONSUMER,
            attributes=attributes,
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
