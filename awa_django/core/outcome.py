"""How an attempt closed."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    """How an attempt closed; the first three are terminal for the job. A member is its value
    as a ``str``, which is what the close statement writes."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETRYABLE = "retryable"
    SNOOZED = "snoozed"
