"""Descriptor and runtime pages: what code declares about queues and kinds (with stale and
drift badges) and which processes are live, with the current maintenance leader."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from awa_django.admin.base import ReadOnlyOperatorAdmin, View, awa_cursor, selected_database
from awa_django.conf import get_settings
from awa_django.declarations.discovery import ensure_jobs_discovered
from awa_django.declarations.jobs import registry
from awa_django.models import KindDescriptor, QueueDescriptor, RuntimeInstance
from awa_django.ops import descriptors, runtimes
from awa_django.storage.browse import RunningAttempt, running_attempts
from awa_django.storage.statement import run

# How many open attempts the runtimes page lists, newest claim first.
RUNNING_SHOWN: Final = 200


def this_process_declares() -> descriptors.Declarations:
    """What this process's own settings and jobs declare, to put values behind the hashes
    that drifting runtimes report."""
    ensure_jobs_discovered()
    return descriptors.declared(get_settings(), registry.jobs(), database=selected_database())


@dataclass(frozen=True, slots=True)
class _DescriptorPage:
    template: str
    title: str
    # ``descriptors.queues`` or ``kinds``, and the matching ``*_drift_versions``.
    records: Callable[..., Sequence[Any]]
    drift_versions: Callable[..., list[descriptors.DeclaredVersion]]


class _DescriptorAdmin(ReadOnlyOperatorAdmin):
    """A descriptor list: every stored descriptor, a drifting one with what each live runtime
    declares for it."""

    page: _DescriptorPage

    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [("", self.changelist, "")]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        alias = selected_database()
        local = this_process_declares()
        page = self.page
        rows = [
            (d, page.drift_versions(d, local, database=alias) if d.drift else [])
            for d in page.records(database=alias)
        ]
        return self.render(request, page.template, page.title, {"rows": rows})


@admin.register(QueueDescriptor)
class QueueDescriptorAdmin(_DescriptorAdmin):
    page = _DescriptorPage(
        "queue_descriptors.html",
        "Queue descriptors",
        descriptors.queues,
        descriptors.queue_drift_versions,
    )


@admin.register(KindDescriptor)
class KindDescriptorAdmin(_DescriptorAdmin):
    page = _DescriptorPage(
        "kind_descriptors.html",
        "Job kind descriptors",
        descriptors.kinds,
        descriptors.kind_drift_versions,
    )


@admin.register(RuntimeInstance)
class RuntimeInstanceAdmin(ReadOnlyOperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [("", self.changelist, "")]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        with awa_cursor() as cursor:
            running = run(cursor, running_attempts(limit=RUNNING_SHOWN + 1))
        instances = runtimes.list(database=selected_database())
        by_id = {r.instance_id: r for r in instances}
        groups: dict[str, list[RunningAttempt]] = defaultdict(list)
        for attempt in running[:RUNNING_SHOWN]:  # newest claim first within each worker
            groups[attempt.claimed_by].append(attempt)
        return self.render(
            request,
            "runtimes.html",
            "Runtimes",
            {
                "runtimes": instances,
                "leader": runtimes.leader(database=selected_database()),
                # (worker id, its runtime if it has reported in, its attempts), by worker id.
                "running": [
                    (worker, by_id.get(worker), groups[worker]) for worker in sorted(groups)
                ],
                "running_truncated": len(running) > RUNNING_SHOWN,
                "running_shown": RUNNING_SHOWN,
                "job_url_name": f"{self.admin_site.name}:awa_django_job_change",
            },
        )
