"""Dead-letter queue page: filter and inspect held jobs, retry them (to their queue or another)
and purge them, with a confirmation page before purging. Every action goes through awa.dlq."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import DELETION
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from awa_django import dlq
from awa_django.admin.base import (
    OperatorAdmin,
    View,
    awa_cursor,
    query_with,
    queue_choices,
    report_form_errors,
)
from awa_django.conf import get_settings
from awa_django.exceptions import InvalidJob
from awa_django.limits import MAX_ID
from awa_django.models import DeadLetter
from awa_django.storage.dlq import ring_held_ids

PAGE_SIZE: Final = 50
AGES: Final = {
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def any_queue_choices() -> list[tuple[str, str]]:
    return [("", "any queue"), *queue_choices()]


def target_queue_choices() -> list[tuple[str, str]]:
    return [("", "same queue"), *queue_choices()]


class DlqFilterForm(forms.Form):
    job_id = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID, label="Job id")
    # Callable choices are read per form, so they follow AWA["QUEUES"] (override_settings too).
    queue = forms.ChoiceField(required=False, choices=any_queue_choices)
    kind = forms.CharField(required=False, max_length=200)
    reason = forms.ChoiceField(
        required=False, choices=[("", "any reason"), *((r, r) for r in dlq.REASONS)]
    )
    age = forms.ChoiceField(
        required=False,
        label="In the DLQ for over",
        choices=[("", "any time"), *((key, key) for key in AGES)],
    )
    before_at = forms.DateTimeField(required=False, widget=forms.HiddenInput)
    before_id = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )


class JobIdsField(forms.Field):
    """Repeated ``job_ids`` values as a list of job ids (the DLQ says which it holds)."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        if not value:
            raise ValidationError("select at least one job")
        try:
            ids = [int(item) for item in value]
        except (TypeError, ValueError):
            raise ValidationError("job ids must be whole numbers") from None
        if not 1 <= min(ids) <= max(ids) <= MAX_ID:
            raise ValidationError(f"job ids must be whole numbers from 1 to {MAX_ID}")
        return ids


class SelectionForm(forms.Form):
    """The rows an action applies to, and the target queue of a retry-to-queue."""

    action = forms.ChoiceField(choices=[("retry", "retry"), ("purge", "purge")])
    job_ids = JobIdsField()
    to_queue = forms.ChoiceField(required=False, choices=target_queue_choices)
    confirmed = forms.BooleanField(required=False)


@admin.register(DeadLetter)
class DeadLetterAdmin(OperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("", self.changelist, ""),
            ("<awa_job_id:job_id>/", self.detail, "change"),
            ("act/", require_POST(self.act), "act"),
        ]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        form = DlqFilterForm(request.GET)
        entries: list[dlq.DlqEntry] = []
        next_query = None
        if form.is_valid():
            data = form.cleaned_data
            if data["job_id"] is not None:
                found = dlq.get(data["job_id"])
                entries = [found] if found is not None else []
            else:
                before = (
                    (data["before_at"], data["before_id"])
                    if data["before_at"] is not None and data["before_id"] is not None
                    else None
                )
                entries = dlq.list(
                    queue=data["queue"] or None,
                    kind=data["kind"] or None,
                    reason=data["reason"] or None,
                    older_than=AGES.get(data["age"]),
                    limit=PAGE_SIZE + 1,
                    before=before,
                )
                if len(entries) > PAGE_SIZE:
                    entries = entries[:PAGE_SIZE]
                    last = entries[-1]
                    next_query = query_with(
                        request.GET, before_at=last.dlq_at.isoformat(), before_id=last.job_id
                    )
        return self.render(
            request,
            "dlq_list.html",
            "Dead-letter queue",
            {
                "form": form,
                "entries": entries,
                "next_query": next_query,
                "is_first_page": not request.GET.get("before_id"),
                "first_query": query_with(request.GET, before_at=None, before_id=None),
                "queues": queue_choices(),
                "act_url": reverse(self.url_name("act")),
            },
        )

    def detail(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_view(request)
        entry = dlq.get(job_id)
        if entry is None:
            messages.warning(request, f"Job {job_id} is not in the dead-letter queue.")
            return redirect(self.url_name("changelist"))
        return self.render(
            request,
            "dlq_detail.html",
            f"Dead-letter job {job_id}",
            {"entry": entry, "queues": queue_choices(), "act_url": reverse(self.url_name("act"))},
        )

    def act(self, request: HttpRequest) -> HttpResponse:
        form = SelectionForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return redirect(self.url_name("changelist"))
        data = form.cleaned_data
        job_ids: list[int] = data["job_ids"]
        if data["action"] == "retry":
            self.require_change(request)
            self.retry(request, job_ids, to_queue=data["to_queue"] or None)
        else:
            self.require_delete(request)
            if not data["confirmed"]:
                return self.confirm_purge(request, job_ids)
            self.purge(request, job_ids)
        return HttpResponseRedirect(reverse(self.url_name("changelist")))

    def confirm_purge(self, request: HttpRequest, job_ids: list[int]) -> HttpResponse:
        # The ring is insert-only, so a purge cannot reach the failed attempt a job's DLQ entry
        # was made from: the page says which jobs keep one, and for how long.
        with awa_cursor() as cursor:
            kept = ring_held_ids(cursor, job_ids)
        return self.render(
            request,
            "dlq_purge_confirm.html",
            "Purge dead-letter jobs?",
            {
                "job_ids": job_ids,
                "kept_ids": kept,
                "gone_count": len(set(job_ids) - set(kept)),
                "failed_retention": timedelta(seconds=get_settings().FAILED_RETENTION_S),
                "completed_retention": timedelta(seconds=get_settings().COMPLETED_RETENTION_S),
                "act_url": reverse(self.url_name("act")),
            },
        )

    def retry(self, request: HttpRequest, job_ids: list[int], *, to_queue: str | None) -> None:
        where = f" to queue {to_queue}" if to_queue else ""
        for job_id in job_ids:
            try:
                retried = dlq.retry(job_id, queue=to_queue)
            except InvalidJob as error:
                messages.error(request, f"Job {job_id} was not retried: {error}")
                continue
            if retried:
                self.log_operator_action(request, [job_id], f"Retried{where}.")
                messages.success(request, f"Job {job_id} retried{where}.")
            else:
                messages.warning(request, f"Job {job_id} is no longer in the dead-letter queue.")

    def purge(self, request: HttpRequest, job_ids: list[int]) -> None:
        for job_id in job_ids:
            if dlq.purge(job_id):
                self.log_operator_action(
                    request, [job_id], "Purged from the dead-letter queue.", flag=DELETION
                )
                messages.success(request, f"Job {job_id} purged.")
            else:
                messages.warning(request, f"Job {job_id} is no longer in the dead-letter queue.")
