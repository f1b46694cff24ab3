"""Template filters of the awa admin pages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django import template
from django.template.defaultfilters import pluralize
from django.utils.formats import date_format
from django.utils.timesince import timesince
from django.utils.timezone import localtime, now

from awa_django.conf import get_settings
from awa_django.core.unknown_kinds import waits_for_kind
from awa_django.declarations.priorities import shown_priority

register = template.Library()


@register.filter
def priority(job: Any) -> str:
    """A job's (or dead letter's) priority as its producer set it (``shown_priority``)."""
    return shown_priority(job.kind, job.priority, job.metadata)


@register.filter
def configured_concurrency(queue: str) -> int | None:
    """A queue's concurrency as this process's AWA["QUEUES"] declares it (None: undeclared)."""
    declared = get_settings().QUEUES.get(queue)
    return None if declared is None else declared.concurrency


@register.filter
def lookup(mapping: Mapping[str, Any], key: str) -> Any:
    """``mapping[key]``, or None: a dict the view built, read by a key the template has."""
    return mapping.get(key)


@register.filter
def nobody_knows_kind(job: Any) -> bool:
    """Whether a job waits because no worker that claimed it had a handler for its kind."""
    return waits_for_kind(job.state, job.errors)


@register.filter
def waiting_for(job: Any, waiting: dict[int, Any]) -> str:
    """What a held workflow step waits for ("waiting on fetch, parse"), from the page's
    ``waiting_on``; empty for any other job."""
    found = waiting.get(job.job_id)
    return "" if found is None else str(found)


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for a <pre> block (autoescaped by the template)."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def when(value: datetime | str | None) -> str:
    """A timestamp to the second in the current time zone, or an em dash when there is none.
    An ISO string (as an error history's ``at`` is stored in JSON) is shown the same way, so
    no page puts a raw ISO time beside a formatted one; one that does not parse is shown as
    it is."""
    if value is None or value == "":
        return "—"
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return value
        value = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return date_format(localtime(value), "Y-m-d H:i:s T")


@register.filter
def ago(value: datetime | None) -> str:
    """How long ago ``value`` was: to the second under a minute ("12 seconds ago"), where
    timesince says "0 minutes"; above that as timesince does ("3 minutes ago", "1 hour, 5
    minutes ago")."""
    if value is None:
        return "—"
    seconds = int((now() - value).total_seconds())
    if seconds < 1:
        # A sample or heartbeat a clock a little ahead wrote.
        return "just now"
    if seconds < 60:
        return f"{seconds} second{pluralize(seconds)} ago"
    return f"{timesince(value, now())} ago"


@register.filter
def duration(value: timedelta) -> str:
    """A period in words to its largest unit ("1 hour", "3 days"), for retention settings."""
    now = datetime.now(UTC)
    return timesince(now - value, now, depth=1)


@register.filter
def elapsed(since: datetime) -> str:
    """How long ago ``since`` was, to the second under an hour ("42 s", "3 min 12 s") and to the
    minute above ("2 h 5 min"): a running job is watched by the second, unlike timesince's
    "0 minutes"."""
    return span(now() - since)


@register.filter
def took(attempt: Any) -> str:
    """How long a finished attempt ran, claim to close, in ``elapsed``'s words."""
    return span(attempt.finalized_at - attempt.claimed_at)


def span(length: timedelta) -> str:
    """A length of time to the second under an hour, to the minute above."""
    seconds = max(int(length.total_seconds()), 0)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"
