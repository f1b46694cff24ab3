"""Helpers for test suites that use awa_django."""

from __future__ import annotations

from django.db import connections

from awa_django.conf import get_settings
from awa_django.storage.control import reset_all


def reset_queue() -> None:
    """Delete every job, attempt and history row in the awa schema and reset its rings.

    For tests that commit (``TransactionTestCase``, ``transactional_db``), whose writes the
    test runner's rollback does not undo. Never call it against a database you care about.
    """
    with connections[get_settings().DATABASE_ALIAS].cursor() as cursor:
        reset_all(cursor)
