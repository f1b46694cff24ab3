"""OpenTelemetry: counters and histograms after a real burst, the enqueue -> execute trace link,
the leader's queue gauges, and a worker that runs unchanged when opentelemetry cannot be
imported."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import awa_django as awa
from awa_django import telemetry as awa_telemetry
from awa_django.core.claimed_job import ClaimedJob
from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.telemetry import (
    PROVIDER_CHECK_INTERVAL_S,
    TRACEPARENT_KEY,
    JobSpan,
    OtelTelemetry,
    Telemetry,
    get_telemetry,
)
from tests.conftest import run_burst
from tests.jobs import always_fails, noop, record, terminal
from tests.maintenance.test_queue_stats import make_mix, run_pass

pytestmark = pytest.mark.usefixtures("awa_db")

_READER = InMemoryMetricReader()
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def otel_sdk() -> None:
    """Install SDK providers once: OpenTelemetry allows one global provider per process."""
    metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)


@pytest.fixture(autouse=True)
def fresh_telemetry() -> Iterator[None]:
    get_telemetry.cache_clear()
    _EXPORTER.clear()
    yield
    get_telemetry.cache_clear()


def points() -> dict[tuple[str, frozenset[tuple[str, Any]]], Any]:
    """Every data point collected now, by (metric name, attributes)."""
    found = {}
    data = _READER.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found[(metric.name, frozenset(point.attributes.items()))] = point
    return found


def value(collected: dict, name: str, **attributes: Any) -> float:
    point = collected.get((name, frozenset(attributes.items())))
    if point is None:
        return 0
    return point.count if hasattr(point, "count") else point.value


def test_a_burst_records_job_counters_and_histograms():
    assert isinstance(get_telemetry(), OtelTelemetry)
    before = points()
    for n in range(3):
        noop.enqueue(n=n)
    always_fails.enqueue(message="x")
    run_burst()
    after = points()

    def delta(name: str, kind: str, **extra: Any) -> float:
        attrs = {"queue": "default", "kind": kind, **extra}
        return value(after, name, **attrs) - value(before, name, **attrs)

    assert delta("awa.job.enqueued", "tests.noop") == 3
    assert delta("awa.job.claimed", "tests.noop") == 3
    assert delta("awa.job.completed", "tests.noop") == 3
    assert delta("awa.job.duration", "tests.noop") == 3  # histogram count
    assert delta("awa.job.wait", "tests.noop") == 3
    # A slow run may reach the 1 s retry too; at least the first failure was counted.
    assert delta("awa.job.retried", "tests.always_fails") >= 1
    # Nothing is left running once the burst is over.
    assert value(after, "awa.job.in_flight", queue="default") == 0


def test_cancel_counts_after_commit():
    before = points()
    awa.cancel(noop.enqueue())
    after = points()
    attrs = {"queue": "default", "kind": "tests.noop"}
    assert (
        value(after, "awa.job.cancelled", **attrs) - value(before, "awa.job.cancelled", **attrs)
        == 1
    )


def test_job_span_is_a_child_of_the_enqueueing_span():
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("view") as view_span:
        job_id = record.enqueue(n=7)
    untraced_id = noop.enqueue()
    assert TRACEPARENT_KEY in awa.get_job(job_id).metadata
    assert TRACEPARENT_KEY not in awa.get_job(untraced_id).metadata
    run_burst()

    spans = {span.name: span for span in _EXPORTER.get_finished_spans()}
    job_span = spans["job.execute tests.record"]
    view = view_span.get_span_context()
    assert job_span.parent is not None
    assert job_span.parent.span_id == view.span_id
    assert job_span.context.trace_id == view.trace_id
    assert job_span.attributes["awa.job.id"] == job_id
    # A job enqueued outside any span starts its own trace.
    assert spans["job.execute tests.noop"].parent is None


def test_a_failing_handler_marks_its_span_as_error():
    always_fails.enqueue(message="bad")
    run_burst()
    span = next(s for s in _EXPORTER.get_finished_spans() if s.name.endswith("always_fails"))
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.events[0].name == "exception"


def test_queue_gauges_report_the_latest_leader_pass():
    make_mix()
    result = run_pass()
    collected = points()

    for depth in result.depths:
        for state in ("available", "scheduled", "retryable", "running"):
            assert value(collected, "awa.queue.depth", queue=depth.queue, state=state) == getattr(
                depth, state
            )
        assert value(collected, "awa.queue.lag", queue=depth.queue) == depth.lag_s
    assert value(collected, "awa.queue.depth", queue="default", state="available") == 2
    assert value(collected, "awa.queue.depth", queue="default", state="scheduled") == 1
    assert value(collected, "awa.queue.depth", queue="default", state="retryable") == 1
    assert value(collected, "awa.queue.depth", queue="default", state="running") == 1
    assert value(collected, "awa.queue.depth", queue="email", state="available") == 1
    assert value(collected, "awa.queue.lag", queue="default") > 0


def test_without_opentelemetry_everything_still_runs(monkeypatch):
    # An entry of None makes every ``import opentelemetry...`` raise ImportError.
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    get_telemetry.cache_clear()
    telemetry = get_telemetry()
    assert type(telemetry) is Telemetry and not telemetry.enabled
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("view"):
        job_id = record.enqueue(n=1)
    assert TRACEPARENT_KEY not in awa.get_job(job_id).metadata
    terminal.enqueue()
    awa.cancel(noop.enqueue())
    summary = run_burst()
    assert summary.claimed == 2
    assert awa.get_job(job_id).state == "completed"


def test_job_spans_are_skipped_until_an_sdk_tracer_provider_is_installed(monkeypatch):
    job = ClaimedJob(
        queue="default", priority=2, shard=0, lane_seq=1, ready_slot=0, job_id=1,
        kind="tests.noop", args={}, attempt=1, run_lease=1, max_attempts=3,
        run_at=datetime.now(UTC), created_at=datetime.now(UTC), metadata={}, tags=[], errors=[],
    )  # fmt: skip
    clock = [1000.0]
    monkeypatch.setattr(awa_telemetry, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    telemetry = OtelTelemetry()
    installed = trace.get_tracer_provider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    # The provider is checked when a batch is claimed, for that batch's job spans.
    telemetry.claimed([job], now=datetime.now(UTC))
    with telemetry.job_span(job) as span:
        assert type(span) is JobSpan  # the no-op: no span was started
    assert _EXPORTER.get_finished_spans() == ()

    # An SDK installed later is picked up by the same telemetry object, at its next check of
    # the provider: not on every job, which would read the environment every time.
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: installed)
    clock[0] += PROVIDER_CHECK_INTERVAL_S / 2
    telemetry.claimed([job], now=datetime.now(UTC))
    with telemetry.job_span(job) as span:
        assert type(span) is JobSpan
    clock[0] += PROVIDER_CHECK_INTERVAL_S / 2
    telemetry.claimed([job], now=datetime.now(UTC))
    with telemetry.job_span(job):
        pass
    assert [s.name for s in _EXPORTER.get_finished_spans()] == ["job.execute tests.noop"]


def attempt(*, queue: str, kind: str, job_id: int) -> ClaimedJob:
    now = datetime.now(UTC)
    return ClaimedJob(
        queue=queue, priority=2, shard=0, lane_seq=job_id, ready_slot=0, job_id=job_id,
        kind=kind, args={}, attempt=1, run_lease=1, max_attempts=3, run_at=now,
        created_at=now, metadata={}, tags=[], errors=[],
    )  # fmt: skip


class CountingCounter:
    """Stands in for an SDK counter: records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, dict[str, Any]]] = []

    def add(self, amount: int, attributes: dict[str, Any] | None = None) -> None:
        self.calls.append((amount, dict(attributes or {})))


def test_counters_are_added_once_per_batch_and_kind_not_once_per_job():
    telemetry = OtelTelemetry()
    counting = {name: CountingCounter() for name in telemetry._counters}
    telemetry._counters = counting  # type: ignore[assignment]
    jobs = [
        attempt(queue="q", kind="a", job_id=1),
        attempt(queue="q", kind="a", job_id=2),
        attempt(queue="q", kind="b", job_id=3),
    ]
    telemetry.claimed(jobs, now=datetime.now(UTC))
    assert sorted(counting["awa.job.claimed"].calls, key=lambda call: call[1]["kind"]) == [
        (2, {"queue": "q", "kind": "a"}),
        (1, {"queue": "q", "kind": "b"}),
    ]
    telemetry.closed(
        [
            Completion.of(jobs[0], Outcome.COMPLETED),
            Completion.of(jobs[1], Outcome.COMPLETED),
            Completion.of(jobs[2], Outcome.FAILED, error={}),
        ],
        rescued={2},
    )
    assert counting["awa.job.completed"].calls == [(2, {"queue": "q", "kind": "a"})]
    assert counting["awa.job.failed"].calls == [(1, {"queue": "q", "kind": "b"})]
    assert counting["awa.job.rescued"].calls == [(1, {"queue": "q", "kind": "a"})]


def test_the_in_flight_gauge_follows_claims_and_finishes():
    telemetry = OtelTelemetry()
    jobs = [attempt(queue="in-flight-gauge", kind="a", job_id=n) for n in (1, 2, 3)]
    telemetry.claimed(jobs, now=datetime.now(UTC))
    assert value(points(), "awa.job.in_flight", queue="in-flight-gauge") == 3
    telemetry.finished(jobs[0], duration_s=0.01)
    assert value(points(), "awa.job.in_flight", queue="in-flight-gauge") == 2
    for job in jobs[1:]:
        telemetry.finished(job, duration_s=0.01)
    collected = points()
    # Still reported, at zero, once nothing runs.
    assert ("awa.job.in_flight", frozenset({("queue", "in-flight-gauge")})) in collected
    assert value(collected, "awa.job.in_flight", queue="in-flight-gauge") == 0


def test_workflow_steps_share_the_enqueueing_trace_and_name_their_workflow():
    from tests.workflows.jobs import add

    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("view") as view_span:
        run = awa.chain(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    run_burst()
    spans = [s for s in _EXPORTER.get_finished_spans() if s.name == "job.execute wf.add"]
    assert sorted(s.attributes["awa.workflow.step"] for s in spans) == ["1", "2"]
    assert {s.attributes["awa.workflow.id"] for s in spans} == {run.workflow_id}
    assert {s.context.trace_id for s in spans} == {view_span.get_span_context().trace_id}


class CountingHistogram:
    """Stands in for an SDK histogram: records each value."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def record(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        self.values.append(amount)


def test_histograms_take_no_value_until_an_sdk_meter_provider_is_installed(monkeypatch):
    from opentelemetry.metrics import _internal as metrics_internal

    clock = [1000.0]
    monkeypatch.setattr(awa_telemetry, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    installed = metrics.get_meter_provider()
    monkeypatch.setattr(
        metrics, "get_meter_provider", lambda: metrics_internal._ProxyMeterProvider()
    )
    telemetry = OtelTelemetry()
    wait, duration = CountingHistogram(), CountingHistogram()
    telemetry._wait, telemetry._duration = wait, duration  # type: ignore[assignment]
    jobs = [attempt(queue="q", kind="a", job_id=n) for n in (1, 2)]
    telemetry.claimed(jobs, now=datetime.now(UTC))
    telemetry.finished(jobs[0], duration_s=0.01)
    assert wait.values == [] and duration.values == []

    # Picked up at the next check, once per claimed batch at most every interval.
    monkeypatch.setattr(metrics, "get_meter_provider", lambda: installed)
    clock[0] += PROVIDER_CHECK_INTERVAL_S / 2
    telemetry.claimed(jobs[:1], now=datetime.now(UTC))
    assert wait.values == []
    clock[0] += PROVIDER_CHECK_INTERVAL_S / 2
    telemetry.claimed(jobs[1:], now=datetime.now(UTC))
    telemetry.finished(jobs[1], duration_s=0.01)
    assert len(wait.values) == 1 and duration.values == [0.01]
