"""Descriptor and runtime pages: what code declares about queues and kinds (with stale and
drift badges) and which processes are live, with the current maintenance leader."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from awa_django import descriptors, runtimes
from awa_django.admin.base import ReadOnlyOperatorAdmin, View
from awa_django.models import KindDescriptor, QueueDescriptor, RuntimeInstance


@admin.register(QueueDescriptor)
class QueueDescriptorAdmin(ReadOnlyOperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [("", self.changelist, "")]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        return self.render(
            request,
            "queue_descriptors.html",
            "Queue descriptors",
            {"descriptors": descriptors.queues()},
        )


@admin.register(KindDescriptor)
class KindDescriptorAdmin(ReadOnlyOperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [("", self.changelist, "")]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        return self.render(
            request,
            "kind_descriptors.html",
            "Job kind descriptors",
            {"descriptors": descriptors.kinds()},
        )


@admin.register(RuntimeInstance)
class RuntimeInstanceAdmin(ReadOnlyOperatorAdmin):
    def operator_urls(self) -> list[tuple[str, View, str]]:
        return [("", self.changelist, "")]

    def changelist(self, request: HttpRequest) -> HttpResponse:
        self.require_view(request)
        return self.render(
            request,
            "runtimes.html",
            "Runtimes",
            {"runtimes": runtimes.list(), "leader": runtimes.leader()},
        )
