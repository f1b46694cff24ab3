"""Jobs page: search jobs in every state, inspect one, cancel, retry or run it now; cancel, run
now or retry the ticked rows, or everything a state search matches after confirming the count."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Final

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_POST

from awa_django.admin.base import (
    Committed,
    JobIdsField,
    OperatorAdmin,
    View,
    awa_cursor,
    awa_reverse,
    page_database,
    query_with,
    report_form_errors,
    selected_database,
)
from awa_django.conf import get_settings
from awa_django.declarations.exact_json import check_text, to_json_text
from awa_django.exceptions import InvalidJob
from awa_django.job_record import JobRecord
from awa_django.limits import MAX_ID
from awa_django.models import Job
from awa_django.ops.actions import cancel, cancel_many, retry, retry_many, run_now
from awa_django.storage.backlog import run_now as run_deferred_now
from awa_django.storage.browse import (
    COUNT_CAP,
    JOB_STATES,
    SEARCH_SCAN,
    JobFilter,
    JobPage,
    count_in_state,
    job_attempts,
    job_progress,
    list_jobs,
    suggestions,
)
from awa_django.storage.dlq import purged_at
from awa_django.storage.jobs import jobs_by_id
from awa_django.storage.statement import run, run_read
from awa_django.storage.workflows import WaitingOn, waiting_on

PAGE_SIZE: Final = 50
# States cancel can still act on; the others already ended.
CANCELLABLE: Final = frozenset(
    {"available", "scheduled", "held", "retryable", "running", "waiting_external"}
)
# States awa.retry puts back as a fresh attempt.
RETRYABLE: Final = frozenset({"dlq", "failed", "cancelled"})
# States awa.run_now moves ahead of their run_at.
RUNNABLE_NOW: Final = frozenset({"scheduled", "retryable"})
# Jobs one step of an action on everything matching reads and acts on; each job's cancel, and
# each step's run-now, commits on its own.
BULK_BATCH_SIZE: Final = 1000
BULK_ACTIONS: Final = {"cancel": CANCELLABLE, "run_now": RUNNABLE_NOW, "retry": RETRYABLE}
# What the confirmation asks and the result message says, per action.
BULK_WORDS: Final = {
    "cancel": ("Cancel", "Cancelled {reached} matching {words}."),
    "run_now": ("Run now", "Ran {reached} now matching {words}."),
    "retry": ("Retry", "Retried {reached} matching {words}."),
}
# Newer pages a jobs page remembers the way back to.
NEWER_KEPT: Final = 50


class JobSearchForm(forms.Form):
    job_id = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID, label="Job id")
    kind = forms.CharField(
        required=False,
        max_length=200,
        help_text="the start of the name, any case",
        widget=forms.TextInput(attrs={"list": "awa-kinds"}),
    )
    queue = forms.CharField(
        required=False,
        max_length=200,
        help_text="the start of the name, any case",
        widget=forms.TextInput(attrs={"list": "awa-queues"}),
    )
    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *((s, s) for s in JOB_STATES)]
    )
    args = forms.CharField(
        required=False,
        max_length=2000,
        label="Arguments contain",
        help_text='a JSON object, such as {"user_id": 7}, or a path: user.id:7',
    )
    tag = forms.CharField(required=False, max_length=200)
    error = forms.CharField(
        required=False,
        max_length=200,
        label="Error text",
        help_text="in a message or type, any case",
        widget=forms.TextInput(attrs={"list": "awa-error-types"}),
    )
    before = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )
    # The cursors of the newer pages walked through, oldest last, for the "Newer" link.
    newer = forms.RegexField(
        required=False,
        regex=r"^[0-9]{1,19}(\.[0-9]{1,19})*$",
        max_length=1000,
        widget=forms.HiddenInput,
    )

    def clean_args(self) -> str | None:
        text = self.cleaned_data["args"]
        if not text:
            return None
        path = ARGS_PATH.fullmatch(text)
        if path is not None and not text.lstrip().startswith(("{", "[")):
            value = path_object(path["path"], path["value"])
        else:
            try:
                value = json.loads(text, parse_constant=refuse_constant)
            except (ValueError, RecursionError):
                raise ValidationError(
                    'not JSON: write an object such as {"user_id": 7}, or a path such as user_id:7'
                ) from None
        if not isinstance(value, dict):
            raise ValidationError('must be a JSON object, such as {"user_id": 7}')
        try:
            return to_json_text(value, field="args")
        except InvalidJob as refused:
            raise ValidationError(str(refused)) from None
        except RecursionError:
            raise ValidationError("nested too deeply") from None

    def clean_tag(self) -> str | None:
        return self.storable("tag")

    def clean_error(self) -> str | None:
        return self.storable("error")

    def storable(self, field: str) -> str | None:
        text: str = self.cleaned_data[field]
        if not text:
            return None
        try:
            check_text(text, field=field)
        except InvalidJob as refused:
            raise ValidationError(str(refused)) from None
        return text

    def newer_cursors(self) -> list[int]:
        trail = self.cleaned_data["newer"]
        return [int(cursor) for cursor in trail.split(".")] if trail else []


def refuse_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# An argument searched by its path, as error messages name arguments ("args.user.id"):
# ``user.id:7`` (or ``args.user.id:7``) finds the jobs whose arguments contain
# {"user": {"id": 7}}. A key holding "." or ":" needs the JSON form.
ARGS_PATH: Final = re.compile(
    r"\s*(?:args\.)?(?P<path>[^.:\s{}\[\]]+(?:\.[^.:\s{}\[\]]+)*)\s*:(?P<value>.*)", re.DOTALL
)


def path_object(path: str, text: str) -> dict[str, object]:
    """The object holding ``text``'s value at ``path``: the value as JSON when it reads as JSON
    (``7``, ``true``, ``"7"``, ``[1]``), else as the text itself (``Paris``)."""
    raw = text.strip()
    value: object
    try:
        value = json.loads(raw, parse_constant=refuse_constant)
    except (ValueError, RecursionError):
        value = raw
    *outer, innermost = path.split(".")
    found: dict[str, object] = {innermost: value}
    for key in reversed(outer):
        found = {key: found}
    return found


def page_links(
    query: QueryDict, before: int | None, newer: list[int], page: JobPage | None
) -> tuple[str | None, str | None]:
    """The query strings of the older and the newer page. Pages are keyset cursors walking
    down the ids, so the way back up is carried along: each older link appends the current
    cursor (0 for the first page) to ``newer``, keeping the last NEWER_KEPT; further back than
    that, the newest page is the way up."""
    older = None
    if page is not None and page.next_before is not None:
        trail = [*newer, before or 0][-NEWER_KEPT:]
        older = query_with(
            query, before=page.next_before, newer=".".join(str(cursor) for cursor in trail)
        )
    if before is None or not newer:
        return older, None
    *rest, previous = newer
    return older, query_with(
        query,
        before=previous or None,
        newer=".".join(str(cursor) for cursor in rest) or None,
    )


class SelectionForm(forms.Form):
    """The ticked rows of a jobs page, and the search to return to."""

    job_ids = JobIdsField()
    return_query = forms.CharField(required=False, max_length=2000)


class MatchingActionForm(forms.Form):
    """An action on every job a state search covers (the search's own fields, repeated)."""

    action = forms.ChoiceField(
        choices=[("cancel", "cancel"), ("run_now", "run now"), ("retry", "retry")]
    )
    kind = forms.CharField(required=False, max_length=200)
    queue = forms.CharField(required=False, max_length=200)
    state = forms.ChoiceField(choices=[(s, s) for s in JOB_STATES])
    # The count the confirmation page showed, for the result message.
    counted = forms.IntegerField(required=False, min_value=0, max_value=MAX_ID)
    confirmed = forms.BooleanField(required=False)

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        action, state = data.get("action"), data.get("state")
        if action in BULK_ACTIONS and state is not None and state not in BULK_ACTIONS[action]:
            allowed = ", ".join(sorted(BULK_ACTIONS[action]))
            self.add_error("state", f"{action} acts on jobs that are {allowed}, not {state}")
        return data

    def filter(self) -> JobFilter:
        data = self.cleaned_data
        return JobFilter(
            kind=data["kind"] or None, queue=data["queue"] or None, state=data["state"]
        )


def retried_summary(done: int, skipped: int) -> str:
    """The one message of a retry of ticked rows: ``Retried 3 jobs; skipped 1 that is not
    failed, cancelled or dead.``"""
    retried = f"Retried {done} job{pluralize(done)}"
    if not skipped:
        return f"{retried}."
    return (
        f"{retried}; skipped {skipped} that {pluralize(skipped, 'is,are')}"
        " not failed, cancelled or dead."
    )


def describe(where: JobFilter) -> str:
    """The search in words, for messages and the admin log: ``state=scheduled, queue=email``."""
    parts = (("state", where.state), ("kind", where.kind), ("queue", where.queue))
    return ", ".join(f"{name}={value}" for name, value in parts if value)


@admin.register(Job)
class JobAdmin(OperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("", self.changelist, ""),
            ("cancel-selected/", require_POST(self.cancel_selected), "cancel_selected"),
            ("run-now-selected/", require_POST(self.run_now_selected), "run_now_selected"),
            ("retry-selected/", require_POST(self.retry_selected), "retry_selected"),
            ("act-matching/", require_POST(self.act_matching), "act_matching"),
            ("<awa_job_id:job_id>/", self.detail, "change"),
            ("<awa_job_id:job_id>/cancel/", require_POST(self.cancel_job), "cancel"),
            ("<awa_job_id:job_id>/retry/", require_POST(self.retry_job), "retry"),
            ("<awa_job_id:job_id>/run-now/", require_POST(self.run_now_job), "run_now"),
        ]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        form = JobSearchForm(request.GET)
        jobs: list[JobRecord] = []
        waiting: dict[int, WaitingOn] = {}
        page = None
        next_query = newer_query = None
        state_count = None
        if form.is_valid():
            data = form.cleaned_data
            with awa_cursor() as cursor:
                if data["job_id"] is not None:
                    jobs = run(cursor, jobs_by_id([data["job_id"]]))
                else:
                    where = JobFilter(
                        kind=data["kind"] or None,
                        queue=data["queue"] or None,
                        state=data["state"] or None,
                        args=data["args"],
                        tag=data["tag"],
                        error=data["error"],
                    )
                    page = run_read(
                        cursor,
                        list_jobs(where=where, before=data["before"], limit=PAGE_SIZE, count=True),
                    )
                    jobs = page.jobs
                    state_count = page.count
                held = [job.job_id for job in jobs if job.state == "held"]
                waiting = run(cursor, waiting_on(held)) if held else {}
            next_query, newer_query = page_links(
                request.GET, data["before"], form.newer_cursors(), page
            )
        with awa_cursor() as cursor:
            offered = run_read(cursor, suggestions())
        return self.render(
            request,
            "job_list.html",
            "Jobs",
            {
                "form": form,
                "jobs": jobs,
                "waiting_on": waiting,
                "page": page,
                "next_query": next_query,
                "newer_query": newer_query,
                "search_scan": SEARCH_SCAN,
                "suggestions": offered,
                "suggested_queues": sorted(set(offered.queues) | set(get_settings().QUEUES)),
                "cancellable_states": CANCELLABLE,
                "runnable_now_states": RUNNABLE_NOW,
                "retryable_states": RETRYABLE,
                "cancel_selected_url": awa_reverse(self.url_name("cancel_selected")),
                "run_now_selected_url": awa_reverse(self.url_name("run_now_selected")),
                "retry_selected_url": awa_reverse(self.url_name("retry_selected")),
                "act_matching_url": awa_reverse(self.url_name("act_matching")),
                "return_query": request.GET.urlencode(),
                "state_count": state_count,
                "count_cap": COUNT_CAP,
                "is_first_page": not request.GET.get("before"),
                "first_query": query_with(request.GET, before=None, newer=None),
            },
        )

    def detail(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_view(request)
        with awa_cursor() as cursor:
            found = run(cursor, jobs_by_id([job_id]))
            attempts = run(cursor, job_attempts(job_id)) if found else []
            progress = run(cursor, job_progress(job_id)) if found else None
        if not found:
            messages.warning(request, self.missing_message(job_id))
            return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))
        job = found[0]
        return self.render(
            request,
            "job_detail.html",
            f"Job {job_id}",
            {
                "job": job,
                "attempts": attempts,
                "saved": progress,
                # Shown once, as a bar (a job may save a message without a percent).
                "percent": (progress.progress or {}).get("percent") if progress else None,
                "retry_url": (
                    awa_reverse(self.url_name("retry"), args=[job_id])
                    if job.state in RETRYABLE
                    else None
                ),
                "cancel_url": (
                    awa_reverse(self.url_name("cancel"), args=[job_id])
                    if job.state in CANCELLABLE
                    else None
                ),
                "run_now_url": (
                    awa_reverse(self.url_name("run_now"), args=[job_id])
                    if job.state in RUNNABLE_NOW
                    else None
                ),
            },
        )

    def missing_message(self, job_id: int) -> str:
        with awa_cursor() as cursor:
            purged = run(cursor, purged_at(job_id))
        if purged is not None:
            return (
                f"Job {job_id} was purged from the dead-letter queue at"
                f" {purged:%Y-%m-%d %H:%M:%S %Z}: its arguments and errors are gone."
            )
        return f"Job {job_id} does not exist (or its history was pruned)."

    def cancel_job(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_change(request)
        self.cancel_one(request, job_id)
        return HttpResponseRedirect(awa_reverse(self.url_name("change"), args=[job_id]))

    def cancel_one(self, request: HttpRequest, job_id: int) -> bool:
        reason = f"cancelled by {request.user} in the admin"
        if cancel(job_id, reason=reason, database=selected_database()):
            self.log_operator_action(request, [job_id], "Cancelled.")
            messages.success(request, f"Job {job_id} cancelled.")
            return True
        messages.warning(request, f"Job {job_id} was not cancelled: it had already ended.")
        return False

    def run_now_one(self, request: HttpRequest, job_id: int) -> bool:
        if run_now(job_id, database=selected_database()):
            self.log_operator_action(request, [job_id], "Run now.")
            messages.success(request, f"Job {job_id} runs now.")
            return True
        messages.warning(
            request, f"Job {job_id} was not run now: it is no longer scheduled or retryable."
        )
        return False

    def run_now_job(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_change(request)
        self.run_now_one(request, job_id)
        return HttpResponseRedirect(awa_reverse(self.url_name("change"), args=[job_id]))

    def cancel_selected(self, request: HttpRequest) -> HttpResponse:
        """Cancel the ticked rows of a page (at most a page's worth), one message per job."""
        return self.act_selected(request, self.cancel_one)

    def run_now_selected(self, request: HttpRequest) -> HttpResponse:
        """Run the ticked scheduled or retryable rows now, one message per job."""
        return self.act_selected(request, self.run_now_one)

    def retry_selected(self, request: HttpRequest) -> HttpResponse:
        """Retry the ticked failed, cancelled or dead-letter rows, with one message for all."""
        return self.act_selected(request, self.retry_one, summarize=retried_summary)

    def act_selected(
        self,
        request: HttpRequest,
        act_one: Callable[[HttpRequest, int], bool],
        *,
        summarize: Callable[[int, int], str] | None = None,
    ) -> HttpResponse:
        """Act on each ticked row. ``act_one`` says whether it acted; with ``summarize`` (given
        the counts done and skipped) one message tells the outcome instead of ``act_one``
        writing one per job."""
        self.require_change(request)
        form = SelectionForm(request.POST)
        back = reverse(self.url_name("changelist"))  # its query: the form's
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(back)
        job_ids: list[int] = form.cleaned_data["job_ids"]
        if len(job_ids) > PAGE_SIZE:
            messages.error(request, f"Select at most {PAGE_SIZE} jobs at a time.")
            return HttpResponseRedirect(back)
        done = sum(act_one(request, job_id) for job_id in job_ids)
        if summarize is not None:
            level = messages.SUCCESS if done else messages.WARNING
            messages.add_message(request, level, summarize(done, len(job_ids) - done))
        # Only the query string comes from the form; the path is ours, so no open redirect.
        query = QueryDict(form.cleaned_data["return_query"]).urlencode()
        return HttpResponseRedirect(f"{back}?{query}" if query else back)

    def act_matching(self, request: HttpRequest) -> HttpResponse:
        """Cancel, run now or retry every job a state search covers: a confirmation page with the
        count first, then batches of ``BULK_BATCH_SIZE`` walked down the job ids, each job
        checked against its current state, so a re-run after an interruption acts only on the
        jobs still in the state and never twice on one."""
        self.require_change(request)
        form = MatchingActionForm(request.POST)
        back = reverse(self.url_name("changelist"))  # its query: the form's
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(back)
        data = form.cleaned_data
        where = form.filter()
        words = describe(where)
        verb, result = BULK_WORDS[data["action"]]
        if not data["confirmed"]:
            with awa_cursor() as cursor:
                count = run_read(cursor, count_in_state(data["state"], where))
            return self.render(
                request,
                "job_matching_confirm.html",
                f"{verb} every matching job?",
                {
                    "count": count,
                    "count_cap": COUNT_CAP,
                    "described": words,
                    "form_data": data,
                    "batch_size": BULK_BATCH_SIZE,
                    "act_matching_url": awa_reverse(self.url_name("act_matching")),
                },
            )
        committed = Committed()
        try:
            done = self.act_on_matching(request, data["action"], where, committed)
        except DatabaseError as error:
            cut = f"{committed.count:,} job{pluralize(committed.count)}"
            self.log_cut_short(
                request,
                error,
                committed.count,
                f"jobs matching {words}",
                result.format(reached=cut, words=words),
                flag=CHANGE,
            )
            raise
        counted = data["counted"]
        if counted is None or counted == done:
            reached = f"{done:,} job{pluralize(done)}"
        else:
            reached = f"{done:,} of the {counted:,} job{pluralize(counted)} counted"
        summary = result.format(reached=reached, words=words)
        self.log_filter_action(request, f"jobs matching {words}", summary, flag=CHANGE)
        messages.success(request, summary)
        search = {
            "state": where.state,
            "kind": where.kind,
            "queue": where.queue,
            "database": page_database(),
        }
        return HttpResponseRedirect(f"{back}?{query_with(QueryDict(), **search)}")

    def act_on_matching(
        self, request: HttpRequest, action: str, where: JobFilter, committed: Committed
    ) -> int:
        """Act on every job ``where`` matches; ``committed`` counts each one as it commits, for
        the log if the statement timeout stops the walk."""
        before = None
        alias = selected_database()
        reason = f"cancelled by {request.user} in the admin"
        while True:
            with awa_cursor() as cursor:
                page = run_read(
                    cursor, list_jobs(where=where, before=before, limit=BULK_BATCH_SIZE)
                )
            ids = [job.job_id for job in page.jobs]
            if action == "cancel":
                # A page's cancels commit together, in one statement; one that finished or was
                # cancelled meanwhile is skipped.
                committed.add(len(cancel_many(ids, reason=reason, database=alias)))
            elif action == "retry":
                # A page's retries commit together, in a few statements; one already retried
                # (by a re-run, or someone else) is no longer in the state and is skipped.
                committed.add(len(retry_many(ids, database=alias)))
            elif ids:
                with transaction.atomic(using=alias), awa_cursor() as cursor:
                    ran = len(run(cursor, run_deferred_now(ids)))
                committed.add(ran)
            if page.next_before is None:
                return committed.count
            before = page.next_before

    def retry_job(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_change(request)
        if self.retry_one(request, job_id):
            messages.success(request, f"Job {job_id} retried.")
        else:
            messages.warning(
                request, f"Job {job_id} was not retried: it is not failed, cancelled or dead."
            )
        return HttpResponseRedirect(awa_reverse(self.url_name("change"), args=[job_id]))

    def retry_one(self, request: HttpRequest, job_id: int) -> bool:
        """Retry one job and log it; the caller says how it went (per job, or in a summary)."""
        if retry(job_id, database=selected_database()):
            self.log_operator_action(request, [job_id], "Retried.")
            return True
        return False
