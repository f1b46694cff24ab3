"""Queue health page: per-queue depths, lag, throughput and DLQ depth, pause/resume/drain (drain
after a confirmation page), live concurrency, and charts per queue or per kind over the last
hour (from the leader's samples), 24 hours or 7 days (from its compacted history)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, Final

from django import forms
from django.contrib import admin, messages
from django.db import connections
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.template.defaultfilters import pluralize
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from awa_django.admin.base import (
    View,
    awa_cursor,
    awa_reverse,
    page_database,
    report_form_errors,
    selected_database,
)
from awa_django.admin.chart import Series, line_chart
from awa_django.admin.cron import CronViews
from awa_django.admin.shards import ShardViews
from awa_django.conf import get_settings
from awa_django.exceptions import InvalidJob
from awa_django.limits import MAX_LIVE_CONCURRENCY, concurrency_problem
from awa_django.models import Queue
from awa_django.ops import queues, runtimes
from awa_django.ops.known import queue_known, unknown_queue_message
from awa_django.storage.backlog import KINDS_NOBODY_RUNS
from awa_django.storage.control import drain_candidates
from awa_django.storage.samples import meta_rows, unsampled_closures
from awa_django.storage.statement import run

CHART_WINDOW: Final = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class ChartWindow:
    """One choice of the page's chart window: its span, the compacted resolution it reads
    (None: the leader's 15-second samples), the step its points are drawn at, and its words."""

    key: str
    span: timedelta
    resolution_s: int | None
    step_s: int
    words: str


# ?window=: the default first. 24 hours of 1-minute buckets are drawn at 5 minutes and 7 days of
# 15-minute ones at 30 minutes (a few hundred points a line, as the hour has).
WINDOWS: Final = {
    w.key: w
    for w in (
        ChartWindow("1h", timedelta(hours=1), None, 60, "last hour"),
        ChartWindow("24h", timedelta(hours=24), queues.MINUTE, 300, "last 24 hours"),
        ChartWindow("7d", timedelta(days=7), queues.QUARTER_HOUR, 1800, "last 7 days"),
    )
}
# ?view=: charts per queue (throughput and depth) or per kind of each queue (throughput).
VIEWS: Final = ("queue", "kind")
# What the concurrency field parses as a number (then checked against the bounds).
WHOLE_NUMBER: Final = re.compile(r"[+-]?[0-9]{1,100}")


class QueueActionForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("pause", "pause"), ("resume", "resume"), ("drain", "drain")]
    )
    # Any queue the page can show: a declared one, or one the database holds jobs or a control
    # row of (another service's, or one removed from the settings while it held jobs).
    queue = forms.CharField(max_length=100)
    confirmed = forms.BooleanField(required=False)

    def clean_queue(self) -> str:
        queue: str = self.cleaned_data["queue"]
        if not queue_known(queue, database=page_database()):
            raise forms.ValidationError(unknown_queue_message(queue))
        return queue


class ConcurrencyForm(forms.Form):
    """Set a queue's live concurrency (``set``) or put it back on the configured value
    (``reset``). The number is checked by hand, not by an IntegerField, so that every bad value
    gets the same message as ``awa.queues.set_concurrency`` gives."""

    action = forms.ChoiceField(choices=[("set", "set"), ("reset", "reset")])
    queue = forms.CharField(max_length=100)
    concurrency = forms.CharField(required=False, strip=True)

    def clean_queue(self) -> str:
        queue: str = self.cleaned_data["queue"]
        if not queue_known(queue, database=page_database()):
            raise forms.ValidationError(unknown_queue_message(queue))
        return queue

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("action") == "set":
            text = cleaned.get("concurrency") or ""
            value: object = int(text) if WHOLE_NUMBER.fullmatch(text) else text
            problem = concurrency_problem(value)
            if problem is not None:
                self.add_error("concurrency", f"Concurrency {problem}.")
            else:
                cleaned["concurrency"] = value
        return cleaned


def stale_samples(sampled_at: Mapping[str, datetime], now: datetime) -> set[str]:
    """The queues whose latest sample is not current: older than the leader's newest round
    (it stopped sampling the queue: an undeclared queue it no longer sees), or older than
    three sampling intervals (no leader samples now). Their depths are shown as last seen."""
    if not sampled_at:
        return set()
    interval = timedelta(seconds=get_settings().QUEUE_STATS_INTERVAL_S)
    newest = max(sampled_at.values())
    return {
        name for name, at in sampled_at.items() if at < newest - interval or at < now - 3 * interval
    }


def snapshot_stats(
    samples: Sequence[queues.QueueSample],
    meta: dict[str, dict[str, Any]],
    unsampled: Mapping[str, tuple[int, int, int]],
    unknown_kinds: Mapping[str, Mapping[str, int]],
    database: str | None = None,
) -> tuple[list[queues.QueueStats], dict[str, datetime]]:
    """Every queue's health as of the leader's latest sample, and when that sample was taken.

    The page's default: reading the samples costs the same at any backlog, where live depths
    (``awa.queues.stats()``) count every waiting job. Totals and throughput are summed from the
    same samples, plus the ``unsampled`` closures since the newest one, as ``stats()`` does.
    ``unknown_kinds`` (the jobs waiting for a worker that knows their kind) is read live: its
    index holds only those jobs. ``database``: the alias they were read from (default
    ``AWA["DATABASE_ALIAS"]``); only its own declared queues are listed.
    """
    conf = get_settings()
    alias = database or conf.DATABASE_ALIAS
    declared = {name for name in conf.QUEUES if conf.queue_database(name) == alias}
    recent = timezone.now() - timedelta(minutes=queues.THROUGHPUT_WINDOW_MIN)
    latest: dict[str, queues.QueueSample] = {}
    completed: dict[str, int] = defaultdict(int)
    failed: dict[str, int] = defaultdict(int)
    completed_recently: dict[str, int] = defaultdict(int)
    for sample in samples:  # oldest first, so the last one per queue wins
        latest[sample.queue] = sample
        completed[sample.queue] += sample.completed
        failed[sample.queue] += sample.failed
        if sample.sampled_at >= recent:
            completed_recently[sample.queue] += sample.completed
    totals = queues.with_unsampled(
        {name: (completed[name], failed[name], completed_recently[name]) for name in latest},
        unsampled,
    )
    rows = [
        queues.queue_stats(
            name, alias, latest.get(name), totals.get(name), meta.get(name), unknown_kinds
        )
        for name in sorted(
            set(declared) | set(latest) | set(meta) | set(totals) | set(unknown_kinds)
        )
    ]
    return rows, {name: sample.sampled_at for name, sample in latest.items()}


def queue_charts(samples: Sequence[queues.QueueSample]) -> dict[str, list[SafeString]]:
    """[throughput chart, depth chart] per queue from the leader's samples, oldest first.

    A sample counts the attempts closed since the previous one, so the rate of a sample is its
    count over the time since the previous sample of the same queue; the first has no rate.
    """
    end = timezone.now()
    start = end - CHART_WINDOW
    by_queue: dict[str, list[queues.QueueSample]] = defaultdict(list)
    for sample in samples:
        by_queue[sample.queue].append(sample)
    charts = {}
    for name, rows in by_queue.items():
        completed, failed = [], []
        for previous, sample in pairwise(rows):
            minutes = (sample.sampled_at - previous.sampled_at).total_seconds() / 60
            if minutes > 0:
                completed.append((sample.sampled_at, sample.completed / minutes))
                failed.append((sample.sampled_at, sample.failed / minutes))
        depths = [
            (s.sampled_at, s.available, s.scheduled + s.retryable, s.running, s.dlq) for s in rows
        ]
        charts[name] = [
            _throughput_chart(f"{name}: throughput, last hour", completed, failed, start, end),
            _depth_chart(f"{name}: depth, last hour", depths, start, end),
        ]
    return charts


def _throughput_chart(
    title: str,
    completed: list[tuple[datetime, float]],
    failed: list[tuple[datetime, float]],
    start: datetime,
    end: datetime,
) -> SafeString:
    return line_chart(
        [
            Series(name="completed", color="#2e7d32", points=completed),
            Series(name="failed", color="#ba2121", points=failed),
        ],
        start=start,
        end=end,
        title=title,
        unit="jobs/min",
    )


def _depth_chart(
    title: str,
    points: Sequence[tuple[datetime, int, int, int, int]],
    start: datetime,
    end: datetime,
) -> SafeString:
    """``points``: (time, available, scheduled + retryable, running, dlq)."""
    lines = [
        Series(name="available", color="#1565c0", points=[(p[0], float(p[1])) for p in points]),
        Series(
            name="scheduled+retry", color="#c67f00", points=[(p[0], float(p[2])) for p in points]
        ),
        Series(name="running", color="#2e7d32", points=[(p[0], float(p[3])) for p in points]),
        Series(name="dlq", color="#ba2121", points=[(p[0], float(p[4])) for p in points]),
    ]
    return line_chart(lines, start=start, end=end, title=title, unit="jobs")


def coarsen(
    buckets: Iterable[queues.QueueRollup], step_s: int
) -> dict[tuple[str, str], list[queues.QueueRollup]]:
    """The buckets of each (queue, kind), merged into ``step_s`` steps (counts summed, depths'
    peak), oldest first: a line of a few hundred points, however fine the stored buckets."""
    merged: dict[tuple[str, str], dict[datetime, queues.QueueRollup]] = defaultdict(dict)
    for bucket in buckets:
        epoch = bucket.bucket_at.timestamp()
        step_at = datetime.fromtimestamp(epoch - epoch % step_s, tz=bucket.bucket_at.tzinfo)
        steps = merged[(bucket.queue, bucket.kind)]
        before = steps.get(step_at)
        steps[step_at] = (
            replace(bucket, bucket_at=step_at)
            if before is None
            else replace(
                before,
                completed=before.completed + bucket.completed,
                failed=before.failed + bucket.failed,
                available=_peak(before.available, bucket.available),
                scheduled=_peak(before.scheduled, bucket.scheduled),
                retryable=_peak(before.retryable, bucket.retryable),
                running=_peak(before.running, bucket.running),
                dlq=_peak(before.dlq, bucket.dlq),
            )
        )
    return {key: [steps[at] for at in sorted(steps)] for key, steps in merged.items()}


def _peak(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def rollup_charts(
    buckets: Sequence[queues.QueueRollup], window: ChartWindow, *, per_kind: bool
) -> dict[str, list[SafeString]]:
    """The charts of each queue from the compacted history: throughput and depth per queue, or
    one throughput chart per kind of it (``per_kind``).

    A point sits at the middle of the part of its step the history covers, and its rate is the
    step's count over that part's minutes: the newest step is still filling (the leader rolls up
    finished minutes only) and the oldest is cut by the window, and over their whole step
    either would read low.
    """
    end = timezone.now()
    start = end - window.span
    resolution = timedelta(seconds=window.resolution_s or queues.MINUTE)
    step = timedelta(seconds=window.step_s)
    if not buckets:
        return {}
    covered_from = min(b.bucket_at for b in buckets)
    covered_to = max(b.bucket_at for b in buckets) + resolution
    charts: dict[str, list[SafeString]] = defaultdict(list)
    for (queue, kind), steps in sorted(coarsen(buckets, window.step_s).items()):
        points = []
        for s in steps:
            lo, hi = max(s.bucket_at, covered_from), min(s.bucket_at + step, covered_to)
            points.append((lo + (hi - lo) / 2, max((hi - lo).total_seconds() / 60, 1.0), s))
        completed = [(at, s.completed / minutes) for at, minutes, s in points]
        failed = [(at, s.failed / minutes) for at, minutes, s in points]
        name = f"{queue} / {kind}" if per_kind else queue
        charts[queue].append(
            _throughput_chart(f"{name}: throughput, {window.words}", completed, failed, start, end)
        )
        if not per_kind:
            depths = [
                (
                    at,
                    s.available or 0,
                    (s.scheduled or 0) + (s.retryable or 0),
                    s.running or 0,
                    s.dlq or 0,
                )
                for at, _, s in points
                if s.available is not None
            ]
            charts[queue].append(
                _depth_chart(f"{queue}: depth, {window.words}", depths, start, end)
            )
    return dict(charts)


def served_concurrency(instances: Iterable[runtimes.RuntimeRecord]) -> dict[str, str]:
    """Per queue, the concurrency its live workers report running it at now (they apply a live
    change within moments), in words: "4 in 2 workers", "4, 8 in 3 workers"."""
    found: dict[str, list[int]] = defaultdict(list)
    for instance in instances:
        if instance.live and not instance.shutting_down:
            for queue, concurrency in instance.queues.items():
                found[queue].append(concurrency)
    return {
        queue: f"{', '.join(map(str, sorted(set(values))))} in {len(values)} "
        f"worker{pluralize(len(values))}"
        for queue, values in found.items()
    }


def chart_links(window: str, view: str, *, live: bool) -> list[tuple[str, str, bool]]:
    """(label, query string, current) of each window and view choice: plain links, so the
    selector works without JavaScript (and live refresh keeps the chosen query)."""
    live_part = "&live=1" if live else ""
    links = [
        (f"{choice.words}", f"?window={key}&view={view}{live_part}", key == window)
        for key, choice in WINDOWS.items()
    ]
    links += [
        (f"per {choice}", f"?window={window}&view={choice}{live_part}", choice == view)
        for choice in VIEWS
    ]
    return links


@admin.register(Queue)
class QueueAdmin(CronViews, ShardViews):
    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        # Queues are not deleted; draining (a change) is the destructive action here.
        return False

    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("", self.changelist, ""),
            ("act/", require_POST(self.act), "act"),
            ("concurrency/", require_POST(self.concurrency), "concurrency"),
            *self.cron_urls(),
            *self.shard_urls(),
        ]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        live = request.GET.get("live") == "1"
        window = WINDOWS.get(request.GET.get("window", "1h"))
        view = request.GET.get("view", "queue")
        if window is None or view not in VIEWS:
            return HttpResponseBadRequest(
                f"window must be one of {', '.join(WINDOWS)} and view one of {', '.join(VIEWS)}"
            )
        alias = selected_database()
        samples = queues.history(window_s=CHART_WINDOW.total_seconds(), database=alias)
        sampled_at: dict[str, datetime] = {}
        if live:
            rows = queues.stats(database=alias)
        else:
            with awa_cursor() as cursor:
                meta = run(cursor, meta_rows())
                unsampled = run(cursor, unsampled_closures(window_s=queues.HOUR_S))
                unknown = run(cursor, KINDS_NOBODY_RUNS)
            rows, sampled_at = snapshot_stats(samples, meta, unsampled, unknown, alias)
        if window.resolution_s is None and view == "queue":
            charts = queue_charts(samples)
        else:
            # The hour per kind reads the 1-minute buckets, drawn at their own step.
            buckets = queues.rollups(
                resolution_s=window.resolution_s or queues.MINUTE,
                window_s=window.span.total_seconds(),
                per_kind=view == "kind",
                database=alias,
            )
            charts = rollup_charts(buckets, window, per_kind=view == "kind")
        stale = stale_samples(sampled_at, timezone.now())
        return self.render(
            request,
            "queue_health.html",
            "Queue health",
            {
                "rows": [(row, sampled_at.get(row.queue), charts.get(row.queue)) for row in rows],
                "max_concurrency": MAX_LIVE_CONCURRENCY,
                "served": served_concurrency(runtimes.list(database=alias)),
                "concurrency_url": awa_reverse(self.url_name("concurrency")),
                "stale": stale,
                "live": live,
                "act_url": awa_reverse(self.url_name("act")),
                "cron_url": awa_reverse(self.url_name("cron")),
                "shards_url": awa_reverse(self.url_name("shards")),
                "window": window,
                "view": view,
                "window_links": chart_links(window.key, view, live=live),
            },
        )

    def act(self, request: HttpRequest) -> HttpResponse:
        self.require_change(request)
        form = QueueActionForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))
        action, queue = form.cleaned_data["action"], form.cleaned_data["queue"]
        try:
            if action == "pause":
                queues.pause(queue, by=str(request.user), database=page_database())
                self.log_operator_action(request, [queue], "Paused.")
                messages.success(request, f"Queue {queue} paused: workers claim nothing from it.")
            elif action == "resume":
                queues.resume(queue, database=page_database())
                self.log_operator_action(request, [queue], "Resumed.")
                messages.success(request, f"Queue {queue} resumed.")
            elif not form.cleaned_data["confirmed"]:
                holder = get_settings().operator_database(page_database(), queue=queue)
                with connections[holder].cursor() as cursor:
                    pending = run(cursor, drain_candidates(queue=queue))
                return self.render(
                    request,
                    "queue_drain_confirm.html",
                    f"Drain queue {queue}?",
                    {
                        "queue": queue,
                        "pending": pending,
                        "pending_text": f"{pending:,} job{pluralize(pending)}",
                        "act_url": awa_reverse(self.url_name("act")),
                    },
                )
            else:
                cancelled = queues.drain(
                    queue,
                    confirm=True,
                    reason=f"drained by {request.user} in the admin",
                    database=page_database(),
                )
                self.log_operator_action(
                    request, [queue], f"Drained: {cancelled} pending jobs cancelled."
                )
                messages.success(
                    request, f"Queue {queue} drained: {cancelled} pending jobs cancelled."
                )
        except InvalidJob as error:
            messages.error(request, str(error))
        return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))

    def concurrency(self, request: HttpRequest) -> HttpResponse:
        """Set or reset a queue's live concurrency; a bad value answers 400 and changes
        nothing."""
        self.require_change(request)
        form = ConcurrencyForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            response = self.changelist(request)
            response.status_code = 400
            return response
        queue = form.cleaned_data["queue"]
        by = str(request.user)
        if form.cleaned_data["action"] == "reset":
            queues.reset_concurrency(queue, by=by, database=page_database())
            self.log_operator_action(request, [queue], "Concurrency reset to the configured value.")
            messages.success(
                request, f"Queue {queue}: concurrency back to each worker's configured value."
            )
        else:
            value = form.cleaned_data["concurrency"]
            queues.set_concurrency(queue, value, by=by, database=page_database())
            self.log_operator_action(request, [queue], f"Concurrency set to {value}.")
            messages.success(
                request,
                f"Queue {queue}: at most {value} jobs at once in each worker process, from now on.",
            )
        return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))
