"""How an attempt closed, and the words operators read for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Final


class Outcome(StrEnum):
    """How an attempt closed; the first three are terminal for the job. A member is its value
    as a ``str``, which is what the close statement writes."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    RETRYABLE = "retryable"
    SNOOZED = "snoozed"


# A failed attempt of a queue with ``dlq`` on: the close statement holds the job in the
# dead-letter queue instead of failed history.
DEAD_LETTERED: Final = "dlq"


def outcome_word(outcome: Outcome, *, dlq: bool) -> str:
    """The outcome as logs and summaries name it: the outcome's value, except ``dlq`` for a
    failure of a queue whose terminal failures go to the dead-letter queue (``dlq``)."""
    # The member itself: a StrEnum member is its value, and ``.value`` is a property lookup
    # paid once per closed attempt.
    return DEAD_LETTERED if dlq and outcome is Outcome.FAILED else outcome


@dataclass(frozen=True, slots=True, kw_only=True)
class OutcomeCounts:
    """Attempts closed, by ``outcome_word``."""

    completed: int = 0
    retryable: int = 0
    snoozed: int = 0
    cancelled: int = 0
    failed: int = 0
    dlq: int = 0

    @classmethod
    def of(cls, counted: Mapping[str, int]) -> OutcomeCounts:
        """From a count per outcome word (a ``Counter``)."""
        return cls(**counted)

    @property
    def total(self) -> int:
        return sum(asdict(self).values())

    def fields(self) -> dict[str, int]:
        """The counts by name, for a log line's ``extra``."""
        return asdict(self)

    def __str__(self) -> str:
        return " ".join(f"{word}={count}" for word, count in asdict(self).items())
