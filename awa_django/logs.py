"""Structured logging: the one helper that supplies job context, and the JSON formatter.

Every worker and maintenance log line about a job passes ``extra=job_extra(...)``, so the
fields ``job_id``, ``kind``, ``queue``, ``attempt``, ``run_lease`` (and ``duration_ms`` where
known) are attributes of the ``LogRecord``: error trackers and ``JsonFormatter`` pick them up
without parsing the message.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any, Final, Protocol

# Below DEBUG, for the lines ``-v 3`` adds (a job's start): ``-v 2`` prints one line per job.
TRACE: Final = 5
logging.addLevelName(TRACE, "TRACE")


class JobLike(Protocol):
    """What ``job_extra`` reads: a ``ClaimedJob`` or a ``Completion``."""

    @property
    def job_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def run_lease(self) -> int: ...


def job_extra(job: JobLike, **more: Any) -> dict[str, Any]:
    """The ``extra`` mapping of a log line about ``job`` (plus ``more``, e.g. duration_ms)."""
    return {
        "job_id": job.job_id,
        "kind": job.kind,
        "queue": job.queue,
        "attempt": job.attempt,
        "run_lease": job.run_lease,
        **more,
    }


# Attributes every LogRecord has; anything else on a record came in through ``extra``.
_STANDARD_ATTRIBUTES: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the ``extra`` fields, and the
    formatted exception when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
