"""The Workflows page (docs/workflows.md): workflows by state and name with counts, one
workflow's steps laid out by dependency level with their states, durations, results and
errors, cancelling a workflow and retrying a failed step (each recorded in the admin log)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from awa_django.admin.base import OperatorAdmin, View, report_form_errors
from awa_django.models import Workflow
from awa_django.producer import workflows
from awa_django.storage.workflows import StepRow

PAGE_SIZE: Final = 100
STATES: Final = ("running", "completed", "failed", "cancelled")


class WorkflowSearchForm(forms.Form):
    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *((s, s) for s in STATES)]
    )
    name = forms.CharField(required=False, max_length=200)


def levels(steps: tuple[StepRow, ...]) -> list[list[StepRow]]:
    """The steps by dependency level: a step sits one level after its deepest dependency, the
    on_failure step after all the others. The page draws each level as one column."""
    depth: dict[str, int] = {}
    by_name = {step.name: step for step in steps}

    def level(name: str) -> int:
        if name not in depth:
            after = by_name[name].after
            depth[name] = 1 + max((level(dep) for dep in after), default=-1)
        return depth[name]

    ordinary = [step for step in steps if not step.on_failure]
    for step in ordinary:
        level(step.name)
    columns: list[list[StepRow]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for step in ordinary:
        columns[depth[step.name]].append(step)
    handlers = [step for step in steps if step.on_failure]
    if handlers:
        columns.append(handlers)
    return columns


def duration(step: StepRow) -> timedelta | None:
    if step.released_at is None or step.finished_at is None:
        return None
    return step.finished_at - step.released_at


@admin.register(Workflow)
class WorkflowAdmin(OperatorAdmin):
    # Workflows live in AWA['DATABASE_ALIAS'] alone.
    per_database = False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("", self.changelist, ""),
            ("<awa_job_id:workflow_id>/", self.detail, "change"),
            ("<awa_job_id:workflow_id>/cancel/", require_POST(self.cancel), "cancel"),
            ("<awa_job_id:workflow_id>/retry/", require_POST(self.retry), "retry"),
        ]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        form = WorkflowSearchForm(request.GET)
        rows: list[Any] = []
        if form.is_valid():
            rows = workflows.list_workflows(
                state=form.cleaned_data["state"] or None,
                name=form.cleaned_data["name"] or None,
                limit=PAGE_SIZE,
            )
        else:
            report_form_errors(request, form)
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.state] = counts.get(row.state, 0) + 1
        return self.render(
            request,
            "workflow_list.html",
            "Workflows",
            {"form": form, "rows": rows, "counts": counts, "page_size": PAGE_SIZE},
        )

    def detail(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        self.require_view(request)
        state = workflows.get_workflow(workflow_id)
        if state is None:
            messages.warning(
                request, f"Workflow {workflow_id} does not exist (or retention reclaimed it)."
            )
            return redirect(self.url_name("changelist"))
        return self.render(
            request,
            "workflow_detail.html",
            f"Workflow {workflow_id}",
            {
                "workflow": state.workflow,
                "counts": state.counts,
                "columns": levels(state.steps),
                "steps": [
                    (step, duration(step), workflows.retry_refusal(state, step.name) is None)
                    for step in state.steps
                ],
                "retry_url": reverse(self.url_name("retry"), args=[workflow_id]),
                "job_url_name": f"{self.admin_site.name}:awa_django_job_change",
                "cancel_url": (
                    reverse(self.url_name("cancel"), args=[workflow_id])
                    if not state.finished
                    else None
                ),
            },
        )

    def cancel(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        self.require_change(request)
        cancelled = workflows.cancel_workflow(
            workflow_id, reason=f"cancelled by {request.user} in the admin"
        )
        if cancelled is None:
            messages.warning(request, f"Workflow {workflow_id} was not running.")
        else:
            self.log_operator_action(
                request, [workflow_id], f"Cancelled the workflow ({cancelled} steps)."
            )
            messages.success(request, f"Workflow {workflow_id} cancelled: {cancelled} steps.")
        return HttpResponseRedirect(reverse(self.url_name("change"), args=[workflow_id]))

    def retry(self, request: HttpRequest, workflow_id: int) -> HttpResponse:
        self.require_change(request)
        step = request.POST.get("step", "")
        if workflows.retry_workflow_step(workflow_id, step):
            self.log_operator_action(
                request, [workflow_id], f"Retried step {step!r}: the workflow resumes."
            )
            messages.success(request, f"Step {step!r} of workflow {workflow_id} runs again.")
        else:
            refusal = workflows.retry_refusal(workflows.get_workflow(workflow_id), step)
            messages.warning(
                request, f"Step {step!r} was not retried: {refusal or 'it changed meanwhile'}."
            )
        return HttpResponseRedirect(reverse(self.url_name("change"), args=[workflow_id]))
