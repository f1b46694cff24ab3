"""Dead-letter queue page: filter and inspect held jobs, see them grouped by error, retry them (to
their queue or another) and purge them, with a confirmation page before purging and before any
action on everything a filter or group matches. Every action goes through awa.dlq."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE, DELETION
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError
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
    queue_choices,
    report_form_errors,
    selected_database,
)
from awa_django.conf import get_settings
from awa_django.exceptions import InvalidJob
from awa_django.limits import MAX_ID
from awa_django.models import DeadLetter
from awa_django.ops import dlq
from awa_django.storage.browse import suggestions
from awa_django.storage.dlq import DlqFilter, count_matching, ring_held_ids
from awa_django.storage.statement import run, run_read

PAGE_SIZE: Final = 50
# The count above the list stops here ("More than 10,000"), as the Jobs page's state counts
# do, so a page load costs a bounded read whatever the DLQ holds; a bulk action's confirmation
# counts exactly.
LIST_COUNT_CAP: Final = 10_000
# Groups the error page lists, largest first.
GROUP_LIMIT: Final = 100
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


def error_type_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        max_length=300,
        label="Error type",
        help_text=(
            "any case, the start of the name or of a dotted part:"
            " LookupError finds builtins.LookupError"
        ),
        widget=forms.TextInput(attrs={"list": "awa-error-types"}),
    )


def kind_field() -> forms.CharField:
    return forms.CharField(
        required=False,
        max_length=200,
        help_text="any case, the start of the name or of a dotted part: charge finds shop.Charge",
        widget=forms.TextInput(attrs={"list": "awa-kinds"}),
    )


def fingerprint_field() -> forms.CharField:
    # A fingerprint is at most 500 characters of message, each digit run grown to "<n>".
    return forms.CharField(required=False, max_length=2000, widget=forms.HiddenInput)


class DlqFilterForm(forms.Form):
    job_id = forms.IntegerField(required=False, min_value=1, max_value=MAX_ID, label="Job id")
    # Callable choices are read per form, so they follow AWA["QUEUES"] (override_settings too).
    queue = forms.ChoiceField(required=False, choices=any_queue_choices)
    kind = kind_field()
    reason = forms.ChoiceField(
        required=False, choices=[("", "any reason"), *((r, r) for r in dlq.REASONS)]
    )
    age = forms.ChoiceField(
        required=False,
        label="In the DLQ for over",
        choices=[("", "any time"), *((key, key) for key in AGES)],
    )
    error_type = error_type_field()
    fingerprint = fingerprint_field()
    before_at = forms.DateTimeField(required=False, widget=forms.HiddenInput)
    before_id = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_ID, widget=forms.HiddenInput
    )


class DlqSelectionForm(forms.Form):
    """The rows an action applies to, and the target queue of a retry-to-queue."""

    action = forms.ChoiceField(choices=[("retry", "retry"), ("purge", "purge")])
    job_ids = JobIdsField()
    to_queue = forms.ChoiceField(required=False, choices=target_queue_choices)
    confirmed = forms.BooleanField(required=False)
    # The list's query string (its filter and page), so the operator lands back on it.
    return_query = forms.CharField(required=False, max_length=2000)


class DlqMatchingActionForm(forms.Form):
    """An action on every entry a list filter covers (the filter's own fields, repeated)."""

    action = forms.ChoiceField(choices=[("retry", "retry"), ("purge", "purge")])
    queue = forms.ChoiceField(required=False, choices=any_queue_choices)
    kind = kind_field()
    reason = forms.ChoiceField(
        required=False, choices=[("", "any reason"), *((r, r) for r in dlq.REASONS)]
    )
    age = forms.ChoiceField(required=False, choices=[("", "any time"), *((k, k) for k in AGES)])
    error_type = error_type_field()
    fingerprint = fingerprint_field()
    to_queue = forms.ChoiceField(required=False, choices=target_queue_choices)
    # The count the confirmation page showed, for the result message.
    counted = forms.IntegerField(required=False, min_value=0, max_value=MAX_ID)
    confirmed = forms.BooleanField(required=False)

    def filter(self) -> DlqFilter:
        return dlq_filter(self.cleaned_data)


def dlq_filter(data: dict[str, Any]) -> DlqFilter:
    """The DlqFilter of a filter form's cleaned data (queue, kind, reason, age, group). Typed
    kinds and error types match by prefix in any case; an error group (its type with its
    fingerprint, from the groups page) is matched exactly, so acting on a group never takes
    in a type that merely starts like it."""
    older_than = AGES.get(data["age"])
    error_type = data["error_type"] or None
    fingerprint = data["fingerprint"] or None
    return DlqFilter(
        queue=data["queue"] or None,
        kind_prefix=data["kind"] or None,
        reason=data["reason"] or None,
        older_than_s=older_than.total_seconds() if older_than is not None else None,
        error_type=error_type if fingerprint else None,
        error_type_prefix=None if fingerprint else error_type,
        fingerprint=fingerprint,
    )


def describe(where: DlqFilter, age: str) -> str:
    """The filter in words, for messages and the admin log, such as
    ``queue=default, in the DLQ for over 1d``."""
    parts = [
        f"{name}={value}"
        for name, value in (
            # A prefix is named like an exact value, as the Jobs page names its kind prefix.
            ("queue", where.queue),
            ("kind", where.kind or where.kind_prefix),
            ("reason", where.reason),
            ("error type", where.error_type or where.error_type_prefix),
            ("message like", where.fingerprint),
        )
        if value
    ]
    return ", ".join([*parts, *([f"in the DLQ for over {age}"] if age else [])])


def matched_text(matched: int, *, filtered: bool) -> str:
    """The size of the whole match above the list: ``1,204 entries match.``, or, counted past
    LIST_COUNT_CAP, ``More than 10,000 entries match.``"""
    if matched > LIST_COUNT_CAP:
        entries = f"More than {LIST_COUNT_CAP:,} entries"
    else:
        entries = f"{matched:,} entr{pluralize(matched, 'y,ies')}"
    if filtered:
        return f"{entries} match{pluralize(matched, 'es,')} this filter."
    return f"{entries} in the dead-letter queue."


def of_counted(done: int, counted: int | None) -> str:
    """``done`` against the count the operator confirmed: ``1,000 of 3,044 dead-letter jobs``
    when they differ (entries came or went meanwhile), else ``3,044 dead-letter jobs``."""
    if counted is None or counted == done:
        return f"{done:,} dead-letter job{pluralize(done)}"
    return f"{done:,} of the {counted:,} dead-letter job{pluralize(counted)} counted"


@admin.register(DeadLetter)
class DeadLetterAdmin(OperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("", self.changelist, ""),
            ("<awa_job_id:job_id>/", self.detail, "change"),
            ("act/", require_POST(self.act), "act"),
            ("act-matching/", require_POST(self.act_matching), "act_matching"),
            ("groups/", self.groups, "groups"),
        ]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        form = DlqFilterForm(request.GET)
        entries: list[dlq.DlqEntry] = []
        next_query = None
        matched: int | None = None
        if form.is_valid():
            data = form.cleaned_data
            if data["job_id"] is not None:
                found = dlq.get(data["job_id"], database=selected_database())
                entries = [found] if found is not None else []
                matched = len(entries)
            else:
                before = (
                    (data["before_at"], data["before_id"])
                    if data["before_at"] is not None and data["before_id"] is not None
                    else None
                )
                where = dlq_filter(data)
                entries = dlq.list(
                    **dlq.match(where),
                    limit=PAGE_SIZE + 1,
                    before=before,
                    database=selected_database(),
                )
                # The whole match, not the page: an operator sees at once whether a filter
                # caught 3 entries or more than 10,000 (one capped count over the DLQ table,
                # never the ring).
                with awa_cursor() as cursor:
                    matched = run_read(cursor, count_matching(where, cap=LIST_COUNT_CAP + 1))
                if len(entries) > PAGE_SIZE:
                    entries = entries[:PAGE_SIZE]
                    last = entries[-1]
                    next_query = query_with(
                        request.GET, before_at=last.dlq_at.isoformat(), before_id=last.job_id
                    )
        is_filtered = form.is_valid() and any(
            form.cleaned_data[f]
            for f in ("queue", "kind", "reason", "age", "error_type", "fingerprint")
        )
        job_id = form.cleaned_data.get("job_id") if form.is_valid() else None
        with awa_cursor() as cursor:
            offered = run_read(cursor, suggestions())
        return self.render(
            request,
            "dlq_list.html",
            "Dead-letter queue",
            {
                "form": form,
                "entries": entries,
                "return_query": request.GET.urlencode(),
                "matched": matched,
                "matched_text": matched_text(matched, filtered=is_filtered or bool(job_id))
                if matched is not None
                else "",
                "next_query": next_query,
                "is_first_page": not request.GET.get("before_id"),
                "first_query": query_with(request.GET, before_at=None, before_id=None),
                "queues": queue_choices(),
                "act_url": awa_reverse(self.url_name("act")),
                "act_matching_url": awa_reverse(self.url_name("act_matching")),
                "groups_url": awa_reverse(self.url_name("groups")),
                "is_filtered": is_filtered,
                "suggestions": offered,
                "suggested_queues": [],
            },
        )

    def groups(self, request: HttpRequest) -> HttpResponse:
        """The entries a filter matches, grouped by their last error's type and message
        fingerprint, each group listable, retryable and purgeable at once."""
        self.require_view(request)
        form = DlqFilterForm(request.GET)
        found = None
        if form.is_valid():
            where = dlq_filter({**form.cleaned_data, "error_type": "", "fingerprint": ""})
            found = dlq.groups(
                queue=where.queue,
                kind_prefix=where.kind_prefix,
                reason=where.reason,
                older_than=where.older_than_s,
                limit=GROUP_LIMIT,
                database=selected_database(),
            )
        base = query_with(
            request.GET, error_type=None, fingerprint=None, before_at=None, before_id=None
        )
        return self.render(
            request,
            "dlq_groups.html",
            "Dead-letter queue by error",
            {
                "form": form,
                "found": found,
                "scan": dlq.GROUP_SCAN,
                "group_limit": GROUP_LIMIT,
                "base_query": base,
                "list_url": awa_reverse(self.url_name("changelist")),
                "act_matching_url": awa_reverse(self.url_name("act_matching")),
                "queues": queue_choices(),
            },
        )

    def detail(self, request: HttpRequest, job_id: int) -> HttpResponse:
        self.require_view(request)
        entry = dlq.get(job_id, database=selected_database())
        if entry is None:
            messages.warning(request, f"Job {job_id} is not in the dead-letter queue.")
            return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))
        return self.render(
            request,
            "dlq_detail.html",
            f"Dead-letter job {job_id}",
            {
                "entry": entry,
                "queues": queue_choices(),
                "act_url": awa_reverse(self.url_name("act")),
            },
        )

    def require_action(self, request: HttpRequest) -> None:
        """The permission of the POSTed action, checked before its form is: a user who may
        not act gets 403 whatever the form holds, never a form error that reveals how far a
        forged request got (retry needs change, purge delete, anything else either)."""
        action = request.POST.get("action")
        if action == "retry":
            self.require_change(request)
        elif action == "purge":
            self.require_delete(request)
        elif not (self.has_change_permission(request) or self.has_delete_permission(request)):
            raise PermissionDenied

    def list_url(self, query: str) -> str:
        """The list with ``query`` (a list's own query string, carried through a form). Only
        the query string comes from the form, re-encoded; the path is ours: no open redirect."""
        back = reverse(self.url_name("changelist"))
        encoded = QueryDict(query[:2000]).urlencode()
        return f"{back}?{encoded}" if encoded else back

    def act(self, request: HttpRequest) -> HttpResponse:
        self.require_action(request)
        form = DlqSelectionForm(request.POST)
        back = self.list_url(request.POST.get("return_query", ""))
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(back)
        data = form.cleaned_data
        job_ids: list[int] = data["job_ids"]
        if data["action"] == "retry":
            self.require_change(request)
            self.retry(request, job_ids, to_queue=data["to_queue"] or None)
        else:
            self.require_delete(request)
            if not data["confirmed"]:
                return self.confirm_purge(request, job_ids, data["return_query"])
            self.purge(request, job_ids)
        return HttpResponseRedirect(back)

    def act_matching(self, request: HttpRequest) -> HttpResponse:
        """Retry or purge every entry a filter covers: a confirmation page with the count
        first, then ``dlq.retry_bulk`` / ``purge_bulk``, which commit in batches of
        ``dlq.BULK_BATCH_SIZE`` and take only entries still there, so a re-run (after a timeout,
        or by a second operator) finishes the rest and never acts twice on one entry."""
        self.require_action(request)
        form = DlqMatchingActionForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))
        data = form.cleaned_data
        if data["action"] == "retry":
            self.require_change(request)
        else:
            self.require_delete(request)
        where = form.filter()
        if where == DlqFilter():
            messages.error(request, "Choose a queue, kind, reason or age first.")
            return HttpResponseRedirect(awa_reverse(self.url_name("changelist")))
        words = describe(where, data["age"])
        if not data["confirmed"]:
            with awa_cursor() as cursor:
                count = run_read(cursor, count_matching(where))
            return self.render(
                request,
                "dlq_matching_confirm.html",
                f"{data['action'].capitalize()} every matching dead-letter job?",
                {
                    "count": count,
                    "described": words,
                    "form_data": form.cleaned_data,
                    "batch_size": dlq.BULK_BATCH_SIZE,
                    "act_matching_url": awa_reverse(self.url_name("act_matching")),
                },
            )
        committed = Committed()
        to_queue = (data["to_queue"] or None) if data["action"] == "retry" else None
        target = f" to queue {to_queue}" if to_queue else ""
        flag = CHANGE if data["action"] == "retry" else DELETION
        kept = {
            f: data[f] or None
            for f in ("queue", "kind", "reason", "age", "error_type", "fingerprint")
        }
        back = self.list_url(query_with(QueryDict(), **kept, database=page_database()))
        try:
            done = self.act_on_matching(data["action"], where, to_queue, committed)
        except InvalidJob as error:
            # Refused before any batch (a target queue of another database): nothing done.
            messages.error(request, f"Nothing was retried: {error}")
            return HttpResponseRedirect(back)
        except DatabaseError as error:
            verb = "Retried" if data["action"] == "retry" else "Purged"
            self.log_cut_short(
                request,
                error,
                committed.count,
                f"dead-letter jobs matching {words}",
                f"{verb} {committed.count:,}{target} matching {words}.",
                flag=flag,
            )
            raise
        if data["action"] == "retry":
            summary = f"Retried {of_counted(done, data['counted'])}{target} matching {words}."
        else:
            summary = f"Purged {of_counted(done, data['counted'])} matching {words}."
        # The bulk functions return a count, not ids: the entry names the filter.
        self.log_filter_action(request, f"dead-letter jobs matching {words}", summary, flag=flag)
        messages.success(request, summary)
        return HttpResponseRedirect(back)

    def act_on_matching(
        self, action: str, where: DlqFilter, to_queue: str | None, committed: Committed
    ) -> int:
        """Retry or purge every entry ``where`` matches, batch by batch; ``committed`` follows
        the batches done, for the log if the statement timeout stops the walk."""
        if action == "retry":
            return dlq.retry_bulk(
                **dlq.match(where),
                to_queue=to_queue,
                progress=committed,
                database=selected_database(),
            )
        return dlq.purge_bulk(
            **dlq.match(where),
            progress=committed,
            database=selected_database(),
        )

    def confirm_purge(
        self, request: HttpRequest, job_ids: list[int], return_query: str
    ) -> HttpResponse:
        # The ring is insert-only, so a purge hides, but cannot delete, the rows a job's DLQ
        # entry was made from: the page says which jobs leave rows on disk, and until when.
        with awa_cursor() as cursor:
            kept = run(cursor, ring_held_ids(job_ids))
        return self.render(
            request,
            "dlq_purge_confirm.html",
            "Purge dead-letter jobs?",
            {
                "job_ids": job_ids,
                "kept_ids": kept,
                "completed_retention": timedelta(seconds=get_settings().COMPLETED_RETENTION_S),
                "act_url": awa_reverse(self.url_name("act")),
                "return_query": return_query,
                "back_url": self.list_url(return_query),
            },
        )

    def retry(self, request: HttpRequest, job_ids: list[int], *, to_queue: str | None) -> None:
        where = f" to queue {to_queue}" if to_queue else ""
        for job_id in job_ids:
            try:
                retried = dlq.retry(job_id, queue=to_queue, database=selected_database())
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
            if dlq.purge(job_id, database=selected_database()):
                self.log_operator_action(
                    request, [job_id], "Purged from the dead-letter queue.", flag=DELETION
                )
                messages.success(request, f"Job {job_id} purged.")
            else:
                messages.warning(request, f"Job {job_id} is no longer in the dead-letter queue.")
