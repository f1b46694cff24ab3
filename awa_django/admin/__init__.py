"""The awa pages of the Django admin, registered on the default site when the admin is
installed (Django imports this module through admin autodiscovery)."""

from __future__ import annotations

from awa_django.admin import dlq, fleet, health, jobs, workflows

__all__ = ["dlq", "fleet", "health", "jobs", "workflows"]
