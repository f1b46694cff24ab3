"""The bounds awa checks numbers against before they reach PostgreSQL or the calendar, so an
input past them is refused with a message naming it instead of failing in the database."""

from __future__ import annotations

from typing import Final

# Job ids and run leases are PostgreSQL bigint.
MAX_ID: Final = 2**63 - 1
# Row limits are cast to PostgreSQL integer.
MAX_LIMIT: Final = 2**31 - 1
# The longest wait, delay or age accepted: 100 years is beyond any real use, and now plus that
# stays inside Python's datetime (year 9999), where 1e12 seconds would not.
MAX_SECONDS: Final = 100 * 365 * 86_400
# The most a queue's concurrency may be set to live (awa.queue_meta's CHECK): a slot is a task
# and, for sync handlers, a thread, so a larger value is a typo, not a plan.
MAX_LIVE_CONCURRENCY: Final = 10_000


def is_job_id(value: object) -> bool:
    """True for an int that can be a job id (1 to bigint's maximum); any other cannot name a
    job, so lookups answer "no such job" for it instead of sending it to the database."""
    return type(value) is int and 1 <= value <= MAX_ID


def concurrency_problem(value: object) -> str | None:
    """Why ``value`` is no concurrency a queue can be set to live, or None."""
    if type(value) is not int:
        return f"must be a whole number, got {value!r}"
    if not 1 <= value <= MAX_LIVE_CONCURRENCY:
        return f"must be between 1 and {MAX_LIVE_CONCURRENCY}, got {value!r}"
    return None


def delay_problem(seconds: object) -> str | None:
    """Why ``seconds`` is no delay a retry or snooze can wait, or None."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return f"must be a number of seconds, got {seconds!r}"
    if not 0 <= seconds <= MAX_SECONDS:  # NaN fails both comparisons
        return f"must be between 0 and {MAX_SECONDS} (100 years), got {seconds!r}"
    return None
