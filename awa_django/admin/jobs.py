"""Jobs page: search jobs in every state, inspect one, cancel or retry it."""

from __future__ import annotations

from typing import Final

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from awa_django.actions import cancel, retry
from awa_django.admin.base import (
    JobIdsField,
    OperatorAdmin,
    View,
    awa_cursor,
    query_with,
    report_form_errors,
)
from awa_django.limits import MAX_ID
from awa_django.models import Job
from awa_django.storage.browse import (
    COUNT_CAP,
    JOB_STATES,
    JobFilter,
    count_in_state,
    job_attempts,
    job_progress,
    list_jobs,
)
from awa_django.storage.dlq import purged_at
from awa_django.storage.jobs import get_jobs

PAGE_SIZE: Final = 50
# States cancel can still act on; the others already ended.
CANCELLABLE: Final = frozenset(
    {"available", "scheduled", "retryable", "running", "waiting_external"}
)
# States awa.retry puts back as a fresh attempt.
RETRYABLE: Final = frozenset({"dlq", "failed", "cancelled"})


class JobSearchForm(forms.Form):
    job_id = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID, label="Job id")
    kind = forms.CharField(
        required=False, max_length=200, help_text="the start of the name, any case"
    )
    queue = forms.CharField(
        required=False, max_length=200, help_text="the start of the name, any case"
    )
    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *((s, s) for s in JOB_STATES)]
    )
    before = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )


class CancelSelectionForm(forms.Form):
    """The ticked rows of a jobs page, and the search to return to."""

    job_ids = JobIdsField()
    return_query = forms.CharField(required=False, max_length=2000)


@admin.register(Job)
class JobAdmin(OperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("", self.changelist, ""),
            ("cancel-selected/", require_POST(self.cancel_selected), "cancel_selected"),
            ("<awa_job_id:job_id>/", self.detail, "change"),
            ("<awa_job_id:job_id>/cancel/", require_POST(self.cancel_job), "cancel"),
            ("<awa_job_id:job_id>/retry/", require_POST(self.retry_job), "retry"),
        ]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        form = JobSearchForm(request.GET)
        jobs, next_query, state_count = [], None, None
        if form.is_valid():
            data = form.cleaned_data
            with awa_cursor() as cursor:
                if data["job_id"] is not None:
                    jobs = get_jobs(cursor, [data["job_id"]])
                else:
                    where = JobFilter(
                        kind=data["kind"] or None,
                        queue=data["queue"] or None,
                        state=data["state"] or None,
                    )
                    page = list_jobs(cursor, where=where, before=data["before"], limit=PAGE_SIZE)
                    jobs = page.jobs
                    if where.state is not None:
                        state_count = count_in_state(cursor, where.state, where)
                    if page.next_before is not None:
                        next_query = query_with(request.GET, before=page.next_before)
        return self.render(
            request,
            "job_list.html",
            "Jobs",
            {
                "form": form,
                "jobs": jobs,
                "next_query": next_query,
                "cancellable_states": CANCELLABLE,
                "cancel_selected_url": reverse(self.url_name("cancel_selected")),
                "return_query": request.GET.urlencode(),
                "state_count": state_count,
                "count_cap": COUNT_CAP,
                "is_first_page": not request.GET.get("before"),
                "first_query": query_with(request.GET, before=None),
            },
        )

    def detail(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_view(request)
        with awa_cursor() as cursor:
            found = get_jobs(cursor, [job_id])
            attempts = job_attempts(cursor, job_id) if found else []
            progress = job_progress(cursor, job_id) if found else None
        if not found:
            messages.warning(request, self.missing_message(job_id))
            return redirect(self.url_name("changelist"))
        job = found[0]
        return self.render(
            request,
            "job_detail.html",
            f"Job {job_id}",
            {
                "job": job,
                "attempts": attempts,
                "saved": progress,
                "retry_url": (
                    reverse(self.url_name("retry"), args=[job_id])
                    if job.state in RETRYABLE
                    else None
                ),
                "cancel_url": (
                    reverse(self.url_name("cancel"), args=[job_id])
                    if job.state in CANCELLABLE
                    else None
                ),
            },
        )

    def missing_message(self, job_id: int) -> str:
        with awa_cursor() as cursor:
            purged = purged_at(cursor, job_id)
        if purged is not None:
            return (
                f"Job {job_id} was purged from the dead-letter queue at"
                f" {purged:%Y-%m-%d %H:%M:%S %Z}: its arguments and errors are gone."
            )
        return f"Job {job_id} does not exist (or its history was pruned)."

    def cancel_job(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_change(request)
        self.cancel_one(request, job_id)
        return HttpResponseRedirect(reverse(self.url_name("change"), args=[job_id]))

    def cancel_one(self, request: HttpRequest, job_id: int) -> None:
        if cancel(job_id, reason=f"cancelled by {request.user} in the admin"):
            self.log_operator_action(request, [job_id], "Cancelled.")
            messages.success(request, f"Job {job_id} cancelled.")
        else:
            messages.warning(request, f"Job {job_id} was not cancelled: it had already ended.")

    def cancel_selected(self, request: HttpRequest) -> HttpResponse:
        """Cancel the ticked rows of a page (at most a page's worth), one message per job."""
        self.require_change(request)
        form = CancelSelectionForm(request.POST)
        back = reverse(self.url_name("changelist"))
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(back)
        job_ids: list[int] = form.cleaned_data["job_ids"]
        if len(job_ids) > PAGE_SIZE:
            messages.error(request, f"Select at most {PAGE_SIZE} jobs at a time.")
            return HttpResponseRedirect(back)
        for job_id in job_ids:
            self.cancel_one(request, job_id)
        # Only the query string comes from the form; the path is ours, so no open redirect.
        query = QueryDict(form.cleaned_data["return_query"]).urlencode()
        return HttpResponseRedirect(f"{back}?{query}" if query else back)

    def retry_job(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_change(request)
        if retry(job_id):
            self.log_operator_action(request, [job_id], "Retried.")
            messages.success(request, f"Job {job_id} retried.")
        else:
            messages.warning(
                request, f"Job {job_id} was not retried: it is not failed, cancelled or dead."
            )
        return HttpResponseRedirect(reverse(self.url_name("change"), args=[job_id]))
