"""The wake locks a waiting worker holds on its own session (see ``sql/queries/wake.sql``)."""

from __future__ import annotations

from typing import Any

from awa_django.sql import queries
from awa_django.storage.statement import Statement, first_text, nothing

_SQL = queries("wake")


def arm_wake(*, queue: str, candidate: bool) -> Statement[str]:
    """Try to become ``queue``'s waiting worker on the running session: ``'armed'``, ``'busy'``
    or ``'taken'``. ``candidate`` says this session holds the candidate lock already."""
    params = {"queue": queue, "candidate": candidate}
    return Statement(sql=_SQL["arm_wake"], params=params, read=first_text)


def release_wake(*, queue: str, armed: bool) -> Statement[None]:
    """Give back ``queue``'s candidate lock, and its wake lock when ``armed``, and wake the
    queue's other workers (on the handover channel) so that one of them takes over waiting."""
    params = {"queue": queue, "armed": armed}
    return Statement(sql=_SQL["release_wake"], params=params, read=nothing)


def disarm_wake(*, queue: str) -> Statement[None]:
    """Give back ``queue``'s wake lock but keep its candidate lock: producers stop notifying,
    and the other processes keep sleeping behind this one's candidacy."""
    return Statement(sql=_SQL["disarm_wake"], params={"queue": queue}, read=nothing)


def _locks_won(rows: list[Any]) -> tuple[bool, list[str]]:
    ((leader, queues),) = rows  # one row, always
    return bool(leader), list(queues)


def try_session_locks(
    *, leader_key: int | None, queues: list[str]
) -> Statement[tuple[bool, list[str]]]:
    """Try the leader lock ``leader_key`` (unless None) and the candidate lock of each of
    ``queues`` on the running session, in one statement: (leader lock won, the queues whose
    candidate lock was won). Prepared at its first run: a process tries every few seconds to a
    minute, so psycopg's threshold (a fifth run) left it planned on every run for minutes; the
    session is never behind a transaction pooler (#37)."""
    params = {"leader_key": leader_key, "queues": queues}
    return Statement(sql=_SQL["try_session_locks"], params=params, read=_locks_won, prepare=True)
