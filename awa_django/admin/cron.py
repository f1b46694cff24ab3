"""The cron page: every stored schedule (every deployment's) with its last and next fire, its
recent fires with their jobs' outcomes, and pause, resume and trigger-now. It lives under queue
health, with the same permissions: view to see it, change to act; an action writes one admin log
entry naming the schedule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django import forms
from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from awa_django.admin.base import (
    OperatorAdmin,
    View,
    awa_reverse,
    report_form_errors,
    selected_database,
)
from awa_django.declarations.cron import NAME_MAX_LENGTH
from awa_django.declarations.cron_expression import CronExpression
from awa_django.exceptions import InvalidSchedule
from awa_django.producer import cron

# The fires of each schedule the page shows (the database keeps 50).
RECENT_FIRES_SHOWN = 10


class CronActionForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("pause", "pause"), ("resume", "resume"), ("trigger", "trigger")]
    )
    name = forms.CharField(max_length=NAME_MAX_LENGTH, strip=False)


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A stored schedule and its next tick after now (None while paused), or why that tick
    cannot be computed here (an expression or timezone this deployment does not know)."""

    schedule: cron.CronJobRecord
    next_fire_at: datetime | None
    problem: str | None
    # Its newest fires and triggers, newest first, with their jobs' states.
    fires: list[cron.CronFire]


def schedule_rows(
    schedules: list[cron.CronJobRecord], now: datetime, fires: dict[str, list[cron.CronFire]]
) -> list[ScheduleRow]:
    rows = []
    for schedule in schedules:
        recent = fires.get(schedule.name, [])
        if schedule.paused_at is not None:
            rows.append(ScheduleRow(schedule, None, None, recent))
            continue
        try:
            expression = CronExpression(schedule.cron_expr, schedule.timezone)
            rows.append(ScheduleRow(schedule, expression.next_tick(now), None, recent))
        except InvalidSchedule as error:
            rows.append(ScheduleRow(schedule, None, str(error), recent))
    return rows


class CronViews(OperatorAdmin):
    """The cron page and its action, for the queue health admin to serve under ``cron/``."""

    def cron_urls(self) -> list[tuple[str, View, str]]:
        return [
            ("cron/", self.cron_changelist, "cron"),
            ("cron/act/", require_POST(self.cron_act), "cron_act"),
        ]

    def cron_changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        # A schedule lives in its queue's database: the page shows the database selected.
        alias = selected_database()
        return self.render(
            request,
            "cron_schedules.html",
            "Cron schedules",
            {
                "rows": schedule_rows(
                    cron.list(database=alias),
                    timezone.now(),
                    cron.recent_fires(RECENT_FIRES_SHOWN, database=alias),
                ),
                "act_url": awa_reverse(self.url_name("cron_act")),
                "job_url_name": f"{self.admin_site.name}:awa_django_job_change",
            },
        )

    def cron_act(self, request: HttpRequest) -> HttpResponse:
        self.require_change(request)
        back = HttpResponseRedirect(awa_reverse(self.url_name("cron")))
        form = CronActionForm(request.POST)
        if not form.is_valid():
            report_form_errors(request, form)
            return back
        action, name = form.cleaned_data["action"], form.cleaned_data["name"]
        if name not in {schedule.name for schedule in cron.list(database=selected_database())}:
            messages.error(request, f"name: no cron schedule named {name!r}.")
            return back
        if action == "trigger":
            job_id = cron.trigger(name, database=selected_database())
            if job_id is None:
                messages.error(request, f"Cron schedule {name} was removed meanwhile.")
                return back
            done = f"Triggered: job {job_id} enqueued."
            messages.success(request, f"Cron schedule {name} triggered: job {job_id} enqueued.")
        elif action == "pause":
            if not cron.pause(name, by=str(request.user), database=selected_database()):
                messages.warning(request, f"Cron schedule {name} is already paused.")
                return back
            done = "Paused."
            messages.success(request, f"Cron schedule {name} paused: it fires nothing.")
        else:
            if not cron.resume(name, database=selected_database()):
                messages.warning(request, f"Cron schedule {name} is not paused.")
                return back
            done = "Resumed."
            messages.success(request, f"Cron schedule {name} resumed from its next tick.")
        self.log_filter_action(request, f"cron schedule {name}", done, flag=CHANGE)
        return back
