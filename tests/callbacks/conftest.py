"""Fixtures shared by the callback tests."""

from collections.abc import Iterator

import pytest
from django.test import override_settings

from tests.callbacks.helpers import FAST
from tests.conftest import BackgroundWorker


@pytest.fixture
def worker() -> Iterator[BackgroundWorker]:
    """A real worker thread with the callback tests' fast timings, stopped after the test."""
    with override_settings(AWA=FAST):
        running = BackgroundWorker().start()
        try:
            yield running
        finally:
            running.stop()
