"""pytest fixtures for projects that use awa_django with pytest-django (docs/testing.md).

Loaded automatically when awa-django is installed (the ``pytest11`` entry point); disable it
with ``-p no:awa_django``. Imports of Django and awa_django happen inside the fixtures, so a
pytest run that never asks for them is unaffected.

- ``awa_jobs``: inspect and run the jobs a test enqueued (``AwaJobs``), in the test's
  transaction under ``db``, committed under ``transactional_db``.
- ``awa_worker``: a real worker on a thread, over committed data (implies
  ``transactional_db``), stopped and drained after the test.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from awa_django.declarations.jobs import DeclaredJob
    from awa_django.job_record import JobRecord
    from awa_django.testing import BackgroundWorker, JobsRun, RanJob


class AwaJobs:
    """The ``awa_jobs`` fixture: ``awa_django.testing``'s helpers as methods."""

    def run(
        self,
        queue: str | None = None,
        kinds: Iterable[str | DeclaredJob[Any, Any]] | None = None,
        max_jobs: int | None = None,
    ) -> JobsRun:
        from awa_django.testing import run_jobs

        return run_jobs(queue=queue, kinds=kinds, max_jobs=max_jobs)

    def work_one(self, job_id: int) -> RanJob:
        from awa_django.testing import work_one

        return work_one(job_id)

    def enqueued(
        self,
        fn_or_kind: str | DeclaredJob[Any, Any] | None = None,
        *,
        args: Mapping[str, Any] | None = None,
        queue: str | None = None,
    ) -> list[JobRecord]:
        from awa_django.testing import enqueued_jobs

        return enqueued_jobs(fn_or_kind, args=args, queue=queue)

    def assert_enqueued(
        self,
        fn_or_kind: str | DeclaredJob[Any, Any],
        *,
        args: Mapping[str, Any] | None = None,
        queue: str | None = None,
        count: int | None = None,
    ) -> list[JobRecord]:
        from awa_django.testing import assert_enqueued

        return assert_enqueued(fn_or_kind, args=args, queue=queue, count=count)

    def assert_not_enqueued(
        self,
        fn_or_kind: str | DeclaredJob[Any, Any] | None = None,
        *,
        args: Mapping[str, Any] | None = None,
        queue: str | None = None,
    ) -> None:
        from awa_django.testing import assert_not_enqueued

        assert_not_enqueued(fn_or_kind, args=args, queue=queue)

    def advance_clock(self, by: float | timedelta) -> int:
        from awa_django.testing import advance_clock

        return advance_clock(by)

    def make_due(self, job_ids: Sequence[int] | None = None) -> int:
        from awa_django.testing import make_due

        return make_due(job_ids)


def _committing() -> bool:
    from django.db import connections

    from awa_django.conf import get_settings

    return not connections[get_settings().DATABASE_ALIAS].in_atomic_block


@pytest.fixture
def awa_jobs(db: None) -> Iterator[AwaJobs]:
    """Inspect and run enqueued jobs. Under ``transactional_db`` the awa tables, which
    pytest-django's flush does not empty, are reset before and after the test."""
    from awa_django.testing import reset_queue

    committing = _committing()
    if committing:
        reset_queue()
    yield AwaJobs()
    if committing:
        reset_queue()


@pytest.fixture
def awa_worker(transactional_db: None) -> Iterator[BackgroundWorker]:
    """A running worker (every queue, maintenance leader included) on a thread; stopped with a
    graceful drain after the test, and the awa tables reset around it."""
    from awa_django.testing import BackgroundWorker, reset_queue

    reset_queue()
    worker = BackgroundWorker().start()
    try:
        yield worker
    finally:
        worker.stop()
        reset_queue()
