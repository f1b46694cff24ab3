"""Read-only listings for operator surfaces: keyset pages of jobs and the history of one job.

Pages walk job ids downwards from a cursor (newest first): at a million jobs a page costs what
it costs at a thousand. A page of one state reads that state's ids from the table that holds it
(open claims for running, the backlog for scheduled, ...), so it finds a rare state at any
depth. A kind or queue filter first finds the (queue, kind) pairs whose names match, by a
few index probes, then walks each pair's ids down the (queue, kind, job_id) index of each table,
so a rare kind is found at any depth too and the other kinds' jobs are never read. A job's
current state comes from the ``awa.jobs`` view, looked up by id for the ids of one page, which is
the only way that view is fast.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any, Final, TypeVar

from django.db import DatabaseError, connections
from psycopg.errors import QueryCanceled

from awa_django.job_record import JobRecord
from awa_django.sql import queries
from awa_django.storage.jobs import JSON_COLUMNS, jobs_by_id
from awa_django.storage.statement import (
    Read,
    Statement,
    Steps,
    all_rows,
    first_int,
    first_value,
    ids,
    nothing,
    rows_of,
    step,
)

_SQL = queries("browse")
T = TypeVar("T")

# Every state the awa.jobs view reports, in the order of a job's life.
JOB_STATES: Final = (
    "available",
    "scheduled",
    # A workflow step waiting for its dependencies (docs/workflows.md).
    "held",
    "running",
    "waiting_external",
    "retryable",
    "completed",
    "failed",
    "cancelled",
    "dlq",
)
# The queries listing the jobs in each state, read from the table that holds it (the first
# down its job_id index, the second, for a kind or queue filter, down its name index), and the
# parameters that pick the state out of it.
_IDS_BY_STATE: Final[dict[str, tuple[str, str, dict[str, bool | str]]]] = {
    "available": ("available_job_ids", "available_job_ids_by_name", {}),
    "running": ("open_attempt_job_ids", "open_attempt_job_ids_by_name", {"waiting": False}),
    "waiting_external": (
        "open_attempt_job_ids",
        "open_attempt_job_ids_by_name",
        {"waiting": True},
    ),
    "scheduled": ("deferred_job_ids", "deferred_job_ids_by_name", {"state": "scheduled"}),
    "retryable": ("deferred_job_ids", "deferred_job_ids_by_name", {"state": "retryable"}),
    "held": ("deferred_job_ids", "deferred_job_ids_by_name", {"state": "held"}),
    "completed": ("closed_job_ids", "closed_job_ids_by_name", {"state": "completed"}),
    "failed": ("closed_job_ids", "closed_job_ids_by_name", {"state": "failed"}),
    "cancelled": ("closed_job_ids", "closed_job_ids_by_name", {"state": "cancelled"}),
    "dlq": ("dlq_job_ids", "dlq_job_ids_by_name", {}),
}
# A state count stops here, so asking costs a bounded scan even on a huge history.
COUNT_CAP: Final = 10_000
# A search by arguments, tag or error text reads, newest first and in batches, the ids of the
# jobs some row of which matches, from the search indexes (migration 0024; search_job_ids),
# then checks each batch's current records (the state, and every field searched). A page stops
# after SEARCH_SCAN such candidates, saying where: a candidate fails its check only when an
# older fact of the job matched or the state searched is another, so a page reads far fewer.
SEARCH_BATCH: Final = 2_000
SEARCH_SCAN: Final = 10_000
# The records of a batch's candidates are checked this many at a time, newest first, until the
# page is full: the awa.jobs view read for a few hundred ids is planned as probes by id, where
# for a whole batch the planner read every ring partition whole (issue #36), and a search whose
# candidates mostly match fills its page from the first slice.
SEARCH_CHECK: Final = 200
_NO_CURSOR: Final = 2**63 - 1
# The states read from the ring's claims and closures, which hold no kind or queue; under a
# kind or queue filter, a pair with at least _MANY_READY_ROWS ready rows is listed by walking
# the state's rows rather than the pair's (see _has_many_ready_rows).
_RING_STATE_QUERIES: Final = frozenset({"open_attempt_job_ids", "closed_job_ids", "failed_job_ids"})
_MANY_READY_ROWS: Final = 2_000
# The states of an open attempt, read through awa.open_attempts (see _count).
_OPEN_STATES: Final = frozenset({"running", "waiting_external"})


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """What a jobs page is narrowed to; None means any. ``kind`` and ``queue`` match names
    that start with them, whatever the case, or with ``exact`` only the names they spell."""

    kind: str | None = None
    queue: str | None = None
    state: str | None = None
    exact: bool = False
    # Content searches, found through the search indexes and checked on each candidate's
    # record: arguments containing this JSON object, as JSON text (jsonb ``@>``), a tag, and
    # text inside an error's message, type or reason (any case).
    args: str | None = None
    tag: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in _IDS_BY_STATE:
            raise ValueError(f"state must be one of {', '.join(JOB_STATES)}, got {self.state!r}")

    def params(self) -> dict[str, str | None]:
        """The kind and queue as LIKE patterns on lower-cased names, for ``name_pairs``."""
        return {"kind": self._pattern(self.kind), "queue": self._pattern(self.queue)}

    def _pattern(self, value: str | None) -> str | None:
        if value is None:
            return None
        return _escape_like(value.lower()) + ("" if self.exact else "%")

    def matches(self, queue: str, kind: str) -> bool:
        """Whether a pair ``name_pairs`` found is one of the filter's (its patterns ignore case,
        which an ``exact`` filter does not)."""
        if not self.exact:
            return True
        return self.queue in (None, queue) and self.kind in (None, kind)

    @property
    def searches_content(self) -> bool:
        return self.args is not None or self.tag is not None or self.error is not None

    def content_params(self) -> dict[str, str | None]:
        return {
            "state": self.state,
            # Every job's arguments contain {}: no search (and none the partial index answers).
            "args": None if self.args == "{}" else self.args,
            "tag": self.tag,
            "error": f"%{_escape_like(self.error)}%" if self.error is not None else None,
        }


def _escape_like(value: str) -> str:
    # LIKE's wildcards in a name (kinds often hold "_") or a message must match themselves.
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPage:
    """One page of jobs, newest first. ``next_before`` is the cursor of the next (older) page,
    None on the last one."""

    jobs: list[JobRecord]
    next_before: int | None
    # For a content search: how many candidates (jobs the search indexes found) this page
    # checked, and whether it stopped at SEARCH_SCAN with candidates left (next_before then
    # continues the scan, not the results).
    scanned: int | None = None
    scan_stopped: bool = False
    # For a page of one state asked to count: its matching jobs, at most COUNT_CAP + 1.
    count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One started attempt of a job; outcome, finalized_at and error stay None while open."""

    attempt: int
    run_lease: int
    claimed_by: str
    claimed_at: datetime
    deadline_at: datetime | None
    outcome: str | None
    finalized_at: datetime | None
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunningAttempt:
    """An attempt a worker holds now; ``percent`` and ``message`` are its last saved progress."""

    claimed_by: str
    job_id: int
    kind: str
    queue: str
    attempt: int
    claimed_at: datetime
    deadline_at: datetime | None
    percent: float | None
    message: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedProgress:
    progress: dict[str, Any] | None
    checkpoint: dict[str, Any] | None
    updated_at: datetime


# A listing's plan spans every ring partition with a probe per row, so its estimated cost passes
# ``jit_above_cost`` although it reads a few hundred rows, and compiling it took far longer than
# running it (docs/benchmarks.md, "Admin pages"): listings and counts are planned without JIT.
_PLAN_WITHOUT_JIT: Final[Statement[str]] = Statement(sql=_SQL["plan_without_jit"], read=first_value)


def _restore_jit(before: str) -> Statement[None]:
    return Statement(sql=_SQL["restore_jit"], params={"jit": before}, read=nothing)


def _planned_without_jit(steps: Callable[[], Steps[T]]) -> Read[T]:
    return Read(steps=steps, plan=_PLAN_WITHOUT_JIT, restore=_restore_jit)


def without_jit(statement: Statement[T]) -> Read[T]:
    """One operator read planned without JIT, as the listings are: the live depths' plan
    (awa.waiting_entries over every lane) is estimated far above ``jit_above_cost``, and at a
    million retained jobs compiling it took ten times as long as running it."""
    return _planned_without_jit(partial(step, statement))


@contextmanager
def bounded_statements(alias: str, timeout_ms: int) -> Iterator[None]:
    """Run the block with each statement on connection ``alias`` cancelled by PostgreSQL after
    ``timeout_ms`` (statement_timeout), then put the setting back. An operator page's query
    then ends on its own when the request that asked for it is abandoned: a client closing its
    tab does not stop a query, and a live refresh would start another (issue #36).

    Outside a transaction the setting is the session's while the block runs; inside the
    caller's it is the transaction's (a rollback undoes it). If it cannot be put back (the
    connection failed meanwhile), the connection is closed, so no later statement inherits
    the cap."""
    connection = connections[alias]
    local = connection.in_atomic_block
    with connection.cursor() as cursor:
        cursor.execute(_SQL["bound_statements"], {"timeout": f"{timeout_ms}ms", "local": local})
        before, _ = cursor.fetchone()
    try:
        yield
    finally:
        if not (local and connection.needs_rollback):
            try:
                with connection.cursor() as cursor:
                    cursor.execute(
                        _SQL["restore_statement_timeout"], {"timeout": before, "local": local}
                    )
            except DatabaseError:
                if not local:
                    connection.close()


def is_statement_timeout(error: BaseException) -> bool:
    """Whether ``error`` (as Django raised it) is a statement PostgreSQL cancelled: its
    statement_timeout passed, or an operator cancelled the backend."""
    return isinstance(error, DatabaseError) and isinstance(error.__cause__, QueryCanceled)


def list_jobs(
    *, where: JobFilter, before: int | None, limit: int, count: bool = False
) -> Read[JobPage]:
    """A page of at most ``limit`` jobs with ids below ``before`` (None: from the newest). With
    ``count``, a page of one state (and no content search) also counts the state's matching
    jobs, as ``count_in_state`` does, reading the names the filter matches only once."""
    return _planned_without_jit(
        partial(_list_jobs, where=where, before=before, limit=limit, count=count)
    )


def _list_jobs(*, where: JobFilter, before: int | None, limit: int, count: bool) -> Steps[JobPage]:
    walk = yield from _walk_for(where)
    if where.searches_content:
        return (yield from _search(where=where, walk=walk, before=before, limit=limit))
    if where.state is not None:
        page, every_id = yield from _list_in_state(
            where.state, walk=walk, before=before, limit=limit
        )
        if not count:
            return page
        if every_id is not None:
            # The page's one read held every id of the state: the count's query, asked for
            # more, would answer the same ids (running's reads every claim of the ring again).
            return replace(page, count=every_id)
        return replace(page, count=(yield from _count(where.state, walk)))
    window = yield from _window_ids(walk, before if before is not None else _NO_CURSOR, limit + 1)
    jobs = list(reversed((yield from step(jobs_by_id(window[:limit]))))) if window else []
    return JobPage(jobs=jobs, next_before=window[limit - 1] if len(window) > limit else None)


@dataclass(frozen=True, slots=True)
class _Walk:
    """How a listing reads its ids: down the job_id indexes (no kind or queue filter, no
    ``names``), or, for a kind or queue filter, pair by pair for the ``names`` pairs that match
    it, each down its own (queue, kind, job_id) index entries (the ``_by_name`` queries)."""

    names: list[tuple[str, str]] | None


def _walk_for(where: JobFilter) -> Steps[_Walk]:
    # The pairs are resolved once per listing: a handful of index probes, then every query of
    # the listing reads only their jobs.
    if where.kind is None and where.queue is None:
        return _Walk(names=None)
    pairs = yield from step(_name_pairs(where.params()))
    return _Walk(names=[(queue, kind) for queue, kind in pairs if where.matches(queue, kind)])


def _name_pairs(params: dict[str, str | None]) -> Statement[list[tuple[str, str]]]:
    return Statement(sql=_SQL["name_pairs"], params=params, read=all_rows)


def _ids(query: str, params: dict[str, Any]) -> Statement[list[int]]:
    return Statement(sql=_SQL[query], params=params, read=ids)


def _newest(id_lists: list[list[int]], size: int) -> list[int]:
    """The newest ``size`` distinct ids of the pairs' lists, each newest first. A job is in two
    pairs when a retry moved it to another queue."""
    newest: list[int] = []
    for job_id in heapq.merge(*id_lists, reverse=True):
        if not newest or newest[-1] != job_id:
            newest.append(job_id)
            if len(newest) == size:
                break
    return newest


def _window_ids(walk: _Walk, before: int, size: int) -> Steps[list[int]]:
    bounds = {"before": before, "size": size}
    if walk.names is None:
        return (yield from step(_ids("job_id_window", bounds)))
    id_lists = []
    for queue, kind in walk.names:
        id_lists.append(
            (
                yield from step(
                    _ids("job_id_window_by_name", {**bounds, "queue": queue, "kind": kind})
                )
            )
        )
    return _newest(id_lists, size)


def _state_ids(
    state: str, walk: _Walk, before: int, size: int, *, page: bool = False
) -> Steps[list[int]]:
    """The newest ``size`` ids of ``state`` below ``before``; ``page``: for a page (a few
    dozen), not a count (to the cap)."""
    by_id, by_name, params = _IDS_BY_STATE[state]
    if page and state == "failed":
        by_id = "failed_job_ids"
    bounds = {"before": before, "size": size, **params}
    if walk.names is None:
        return (yield from _ring_ids(by_id, {**bounds, "queue": None, "kind": None}))
    id_lists = []
    for queue, kind in walk.names:
        pair = {"queue": queue, "kind": kind}
        if state == "available" and (yield from step(_has_many_ready_rows(pair, before))):
            id_lists.append((yield from _available_by_name(pair, before, size)))
            continue
        if by_id in _RING_STATE_QUERIES and (yield from step(_has_many_ready_rows(pair, before))):
            id_lists.append((yield from _ring_ids(by_id, {**bounds, **pair})))
        else:
            id_lists.append((yield from step(_ids(by_name, {**bounds, **pair}))))
    return _newest(id_lists, size)


def _ring_ids(query: str, params: dict[str, Any]) -> Steps[list[int]]:
    if query != "failed_job_ids":
        return (yield from step(_ids(query, params)))
    # Its anti-joins are merges of index walks only with hash and nested-loop joins (and
    # sorting) planned as a last resort while it runs, inside the read's transaction; then the
    # settings are put back (browse.sql, failed_job_ids).
    settings = yield from step(_PLAN_AS_MERGE)
    found = yield from step(_ids(query, params))
    yield from step(Statement(sql=_SQL["restore_merge"], params=settings, read=nothing))
    return found


def _available_by_name(pair: dict[str, str], before: int, size: int) -> Steps[list[int]]:
    # A pair with many ready rows, most of them perhaps claimed, is walked to a bound, then
    # read from what waits below it (browse.sql, available_job_ids_by_name_bounded). The walk
    # stops at its bound only when the planner walks the name index in order: sorting is
    # planned as a last resort while it runs, inside the read's transaction, then the setting
    # is put back.
    sort = yield from step(_PLAN_AS_NAME_WALK)
    found = yield from step(
        _ids("available_job_ids_by_name_bounded", {**pair, "before": before, "size": size})
    )
    yield from step(Statement(sql=_SQL["restore_sort"], params={"sort": sort}, read=nothing))
    return found


def _has_many_ready_rows(pair: dict[str, str], before: int) -> Statement[bool]:
    # Claims and closures hold no names, so a pair's jobs in their states are found either by
    # walking the pair's ready rows, probing each for its claim or closure (short for a rare
    # pair, whatever the state), or by walking the state's rows keeping the pair's (short for
    # a rare state, whatever the pair). The pair's size is one bounded index-only count.
    params = {**pair, "before": before, "cap": _MANY_READY_ROWS}
    return Statement(sql=_SQL["pair_ready_rows"], params=params, read=_many)


def _many(rows: list[Any]) -> bool:
    return first_int(rows) >= _MANY_READY_ROWS


def _list_in_state(
    state: str, *, walk: _Walk, before: int | None, limit: int
) -> Steps[tuple[JobPage, int | None]]:
    """The page, and how many ids the state holds when its first read, from the newest, found
    them all (fewer than it asked for); else None."""
    # The ids come from the table holding the state; the view, read for just those ids, has the
    # last word, so a job that moved on between the two reads is left out, and the next ids are
    # fetched to fill the page.
    matches: list[JobRecord] = []
    below = before if before is not None else _NO_CURSOR
    every_id: int | None = None
    while len(matches) <= limit:
        wanted = limit + 1 - len(matches)
        found = yield from _state_ids(state, walk, below, wanted, page=True)
        if before is None and below == _NO_CURSOR and len(found) < wanted:
            every_id = len(found)
        if not found:
            break
        records = {record.job_id: record for record in (yield from step(jobs_by_id(found)))}
        matches.extend(
            records[job_id]
            for job_id in found
            if job_id in records and records[job_id].state == state
        )
        if len(found) < wanted:  # the state holds no older jobs
            break
        below = found[-1]
    if len(matches) > limit:
        return JobPage(jobs=matches[:limit], next_before=matches[limit - 1].job_id), every_id
    return JobPage(jobs=matches, next_before=None), every_id


def _candidate_ids(where: JobFilter, walk: _Walk, before: int, size: int) -> Steps[list[int]]:
    """The newest ``size`` ids below ``before`` of the jobs a row of which matches the content
    search, from the search indexes; under a kind or queue filter, pair by pair."""
    params = {**where.content_params(), "before": before, "size": size}
    if walk.names is None:
        return (yield from step(_ids("search_job_ids", {**params, "queue": None, "kind": None})))
    id_lists = []
    for queue, kind in walk.names:
        id_lists.append(
            (yield from step(_ids("search_job_ids", {**params, "queue": queue, "kind": kind})))
        )
    return _newest(id_lists, size)


def _search(*, where: JobFilter, walk: _Walk, before: int | None, limit: int) -> Steps[JobPage]:
    # Candidates come newest first from the search indexes (of the kind and queue searched);
    # each batch's records are checked against the state and content search in one query.
    matches: list[JobRecord] = []
    below = before if before is not None else _NO_CURSOR
    scanned = 0
    exhausted = False
    while len(matches) <= limit and scanned < SEARCH_SCAN:
        candidates = yield from _candidate_ids(where, walk, below, SEARCH_BATCH)
        for start in range(0, len(candidates), SEARCH_CHECK):
            checked = candidates[start : start + SEARCH_CHECK]
            found = yield from step(_matching_jobs(checked, where))
            matches.extend(sorted(found, key=lambda record: record.job_id, reverse=True))
            scanned += len(checked)
            below = checked[-1]
            if len(matches) > limit:
                break
        if len(candidates) < SEARCH_BATCH:
            exhausted = True
            break
    if len(matches) > limit:
        return JobPage(jobs=matches[:limit], next_before=matches[limit - 1].job_id, scanned=scanned)
    if exhausted:
        return JobPage(jobs=matches, next_before=None, scanned=scanned)
    return JobPage(jobs=matches, next_before=below, scanned=scanned, scan_stopped=True)


def _matching_jobs(job_ids: list[int], where: JobFilter) -> Statement[list[JobRecord]]:
    return Statement(
        sql=_SQL["matching_jobs"],
        params={"job_ids": job_ids, **where.content_params()},
        read=all_rows,
        rows=rows_of(JobRecord),
        json=JSON_COLUMNS,
    )


def count_in_state(state: str, where: JobFilter) -> Read[int]:
    """How many jobs are in ``state`` and match ``where``'s kind and queue, counting at most
    ``COUNT_CAP + 1``: a result above ``COUNT_CAP`` means "more than that"."""
    return _planned_without_jit(partial(_count_for, state, where))


def _count_for(state: str, where: JobFilter) -> Steps[int]:
    return (yield from _count(state, (yield from _walk_for(where))))


def _count(state: str, walk: _Walk) -> Steps[int]:
    if state == "available":
        return (yield from _count_available(walk))
    if state in _OPEN_STATES:
        # Found through awa.open_attempts (browse.sql, open_attempt_job_ids), which plans its
        # own reads (the leases and the claims since the last rescue pass, or, before any, one
        # hash anti-join of every claim): not as a walk.
        return len((yield from _state_ids(state, walk, _NO_CURSOR, COUNT_CAP + 1)))
    # Planned without hash or merge joins, inside the read's transaction, then the settings are
    # put back. A count stops at COUNT_CAP + 1 ids, but asked for 10,001 of a state with more
    # (completed) the planner hashed every row of the ring to find them, so a count
    # grew with the history (issue #36: 460 ms at 200,000 jobs, seconds at a million); walking
    # the state's job_id index with a probe per id reads at most the cap's worth, at any size.
    hash_join, merge_join = yield from step(_PLAN_AS_WALK)
    counted = len((yield from _state_ids(state, walk, _NO_CURSOR, COUNT_CAP + 1)))
    # Not after an error: a failed statement ends the read (the transaction may be aborted, a
    # statement timeout, where another statement would hide the error).
    yield from step(
        Statement(
            sql=_SQL["restore_joins"], params={"hash": hash_join, "merge": merge_join}, read=nothing
        )
    )
    return counted


def _count_available(walk: _Walk) -> Steps[int]:
    # Read from what waits after each lane's claim cursor (browse.sql, count_available), not by
    # probing ready rows newest first for their claims: that walk read every claimed row above
    # the waiting ones and probed each waiting one for a claim it cannot have. A rare pair is
    # still counted down its own ready rows (few, whatever the queue's backlog holds).
    cap = COUNT_CAP + 1
    if walk.names is None:
        return (yield from step(_available(None, None, cap)))
    counted = 0
    for queue, kind in walk.names:
        pair = {"queue": queue, "kind": kind}
        if (yield from step(_has_many_ready_rows(pair, _NO_CURSOR))):
            counted += yield from step(_available(queue, kind, cap - counted))
        else:
            by_name = {**pair, "before": _NO_CURSOR, "size": cap - counted}
            counted += len((yield from step(_ids("available_job_ids_by_name", by_name))))
        if counted >= cap:
            break
    return counted


def _available(queue: str | None, kind: str | None, cap: int) -> Statement[int]:
    params = {"queue": queue, "kind": kind, "size": cap}
    return Statement(sql=_SQL["count_available"], params=params, read=first_int)


_PLAN_AS_NAME_WALK: Final[Statement[str]] = Statement(
    sql=_SQL["plan_as_name_walk"], read=first_value
)
_PLAN_AS_MERGE: Final[Statement[dict[str, str]]] = Statement(
    sql=_SQL["plan_as_merge"],
    read=lambda rows: {"hash": rows[0][0], "nestloop": rows[0][1], "sort": rows[0][2]},
)
_PLAN_AS_WALK: Final[Statement[tuple[str, str]]] = Statement(
    sql=_SQL["plan_as_walk"], read=lambda rows: (rows[0][0], rows[0][1])
)


# Suggestions offered beside the search fields: names from every table (cheap, one index probe
# per pair), error types from the newest SUGGESTION_SCAN failures of each place that keeps them
# (few: each read detoasts an error list, tracebacks included, and every page load asks).
SUGGESTION_SCAN: Final = 500
SUGGESTION_LIMIT: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Suggestions:
    """The kinds, queues and error types that exist, in name order, for a search form."""

    kinds: list[str]
    queues: list[str]
    error_types: list[str]


def suggestions() -> Read[Suggestions]:
    """What a search form offers to complete its kind, queue and error type fields."""
    return Read(steps=_suggestions)


def _suggestions() -> Steps[Suggestions]:
    pairs = yield from step(_name_pairs({"kind": None, "queue": None}))
    error_types = yield from step(
        Statement(
            sql=_SQL["error_types"],
            params={"scan": SUGGESTION_SCAN, "limit": SUGGESTION_LIMIT},
            read=_firsts,
        )
    )
    return Suggestions(
        kinds=sorted({kind for _, kind in pairs})[:SUGGESTION_LIMIT],
        queues=sorted({queue for queue, _ in pairs})[:SUGGESTION_LIMIT],
        error_types=error_types,
    )


def _firsts(rows: list[Any]) -> list[Any]:
    return [row[0] for row in rows]


def running_attempts(*, limit: int) -> Statement[list[RunningAttempt]]:
    """Up to ``limit`` open attempts, newest claim first."""
    return Statement(
        sql=_SQL["running_attempts"],
        params={"limit": limit},
        read=_running,
        json=("progress",),
    )


def _running(rows: list[Any]) -> list[RunningAttempt]:
    attempts = []
    for claimed_by, job_id, kind, queue, attempt, claimed_at, deadline_at, progress in rows:
        saved = progress or {}
        percent = saved.get("percent")
        attempts.append(
            RunningAttempt(
                claimed_by=claimed_by,
                job_id=job_id,
                kind=kind,
                queue=queue,
                attempt=attempt,
                claimed_at=claimed_at,
                deadline_at=deadline_at,
                percent=float(percent) if isinstance(percent, int | float) else None,
                message=saved.get("message"),
            )
        )
    return attempts


def job_attempts(job_id: int) -> Statement[list[Attempt]]:
    """The attempts of ``job_id`` still in the ring, oldest first."""
    return Statement(
        sql=_SQL["job_attempts"],
        params={"job_id": job_id},
        read=all_rows,
        rows=rows_of(Attempt),
        json=("error",),
    )


def job_progress(job_id: int) -> Statement[SavedProgress | None]:
    """The progress and checkpoint ``job_id`` saved, or None if it saved none."""
    return Statement(
        sql=_SQL["job_progress"],
        params={"job_id": job_id},
        read=_saved,
        rows=rows_of(SavedProgress),
        json=("progress", "checkpoint"),
    )


def _saved(rows: list[SavedProgress]) -> SavedProgress | None:
    return rows[0] if rows else None
