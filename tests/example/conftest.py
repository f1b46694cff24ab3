"""Fixtures of the example-shop tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.test import override_settings


@pytest.fixture(autouse=True)
def quick_worker() -> Iterator[None]:
    """Short retry backoff and poll interval, so burst workers finish retries in moments."""
    # A burst worker re-polls an idle queue only every POLL_INTERVAL_S, and each retry waits
    # RETRY_BACKOFF_BASE_S * 2**(attempt-1): the defaults (1s each) would make tests slow.
    quick = {"RETRY_BACKOFF_BASE_S": 0.05, "POLL_INTERVAL_S": 0.05}
    with override_settings(AWA={**settings.AWA, **quick}):
        yield


@pytest.fixture(autouse=True)
def close_async_orm_connections() -> Iterator[None]:
    """Close the connection the async ORM opened in asgiref's shared sync thread.

    ``notify_warehouse`` is async and uses ``aupdate``, which runs on asgiref's single
    thread-sensitive executor; the worker does not close that thread's connection, and an
    open session would stop pytest-django from dropping the test database at the end.
    """
    yield
    asyncio.run(sync_to_async(connections.close_all)())
