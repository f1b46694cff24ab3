"""One definition per statement, run on either kind of connection the package has.

A storage function that both sides need builds a ``Statement``: its SQL block, its parameters
and how its rows become the answer. ``run`` executes it on a Django cursor (eager mode, the test
helpers, operator reads and external resolutions: the caller's transaction), ``run_async`` on
one of the worker's psycopg connections (the worker and the maintenance leader). Sync and async
calls cannot share a function body; a statement is a value, so both share everything else.

``run_on`` executes one on Django's connection itself, on the psycopg connection under it when
nothing of Django's would see the statement on its way (the enqueue: a web request's hot path).

The two connections differ in one way the answer must not show: Django's hands jsonb back as
text (its JSONField parses it), the worker's psycopg connections parse it. A statement names its
jsonb columns, and ``run`` decodes them before the rows are made.
"""

from __future__ import annotations

import _thread
import json
import weakref
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import islice
from typing import TYPE_CHECKING, Any, Final, Generic, LiteralString, TypeVar, cast

from django.apps import apps
from django.db import transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from psycopg import AsyncConnection, Cursor
from psycopg.pq import ExecStatus
from psycopg.rows import RowFactory, RowMaker, no_result, tuple_row

if TYPE_CHECKING:
    # psycopg's row factories are typed against it; it is not re-exported publicly.
    from psycopg._cursor_base import BaseCursor

T = TypeVar("T")
# A result with rows to fetch (a command's has none).
TUPLES_OK: Final = ExecStatus.TUPLES_OK
# A statement is immutable and only produces its answer: one answering a list of depths is one
# answering an iterable of them.
T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R")
# The job a caller's row maker makes from a row that holds an attempt (the worker's claimed job).
J = TypeVar("J")

# Given a result's column names, the function that makes one row (an ``R``) from its values;
# called once per result, so a check of the columns costs nothing per row. A statement whose
# rows are values of a layer above storage (a claimed job) takes its row maker from the caller.
RowsOf = Callable[[tuple[str, ...]], Callable[[Sequence[Any]], R]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement(Generic[T_co]):
    """One SQL statement, its parameters, and how its fetched rows become the answer."""

    sql: LiteralString
    params: Mapping[str, Any] | None = None
    # The answer, from the rows (tuples, or what ``rows`` made; empty when there is no result).
    read: Callable[[list[Any]], T_co]
    # How rows are made from their values; None keeps them as tuples.
    rows: RowsOf[Any] | None = None
    # Columns that are jsonb, so that both connections read them as parsed values.
    json: tuple[str, ...] = ()
    # On the worker's connections: True prepares it on the server at its first run (a
    # statement a process runs rarely, which psycopg's threshold of five runs per connection
    # would leave planned on every run for minutes); a connection that prepares nothing (a
    # poll-only pool behind a transaction pooler) still prepares nothing. None: psycopg's
    # threshold. Django's connection ignores it.
    prepare: bool | None = None


def all_rows(rows: list[Any]) -> list[Any]:
    """``read`` for a statement whose answer is its rows."""
    return rows


def nothing(rows: list[Any]) -> None:
    """``read`` for a statement run for its effect."""


def first_int(rows: list[Any]) -> int:
    """``read`` for a statement answering one integer (0 when it returns no row)."""
    return int(rows[0][0]) if rows else 0


def first_value(rows: list[Any]) -> Any:
    """``read`` for a statement answering one value (None when it returns no row)."""
    return rows[0][0] if rows else None


def first_bool(rows: list[Any]) -> bool:
    """``read`` for a statement answering one boolean (False when it returns no row)."""
    return bool(rows[0][0]) if rows else False


def first_text(rows: list[Any]) -> str:
    """``read`` for a statement answering one text value (a function's verdict)."""
    return str(rows[0][0])


def ids(rows: list[Any]) -> list[int]:
    """``read`` for a statement answering one id a row (job ids), in its order."""
    return [int(row[0]) for row in rows]


def first_row(rows: list[Any]) -> tuple[Any, ...]:
    """``read`` for a statement answering one row (a reservation), as a tuple."""
    return tuple(rows[0])


def any_row(rows: list[Any]) -> bool:
    """``read`` for a statement whose answer is whether it returned a row."""
    return bool(rows)


def columns(items: Sequence[Any], *names: str) -> dict[str, list[Any]]:
    """Array parameters of a statement that unnests rows: under each name, that attribute of
    every item, in order."""
    return {name: [getattr(item, name) for item in items] for name in names}


@dataclass(frozen=True, slots=True)
class Atomic(Generic[T_co]):
    """Statements that commit together: run in order in one transaction (a savepoint inside
    the caller's), the answer is the last one's."""

    first: tuple[Statement[Any], ...]
    last: Statement[T_co]


@dataclass(frozen=True, slots=True, kw_only=True)
class Copy(Generic[R, T_co]):
    """Rows streamed in with ``COPY ... FROM STDIN`` (``sql``), after the statement that reserves
    their ids and places: ``lines`` makes the rows' text lines (``storage/copy_text.py``) from
    ``reserve``'s answer, and ``answer`` the copy's (the ids, in order)."""

    reserve: Statement[R]
    sql: LiteralString
    lines: Callable[[R], Iterable[str]]
    answer: Callable[[R], T_co]


# Rows sent per write of a COPY: large enough that each write call is cheap, small enough that a
# batch of any size does not build one huge string.
ROWS_PER_WRITE: Final = 1000


# A read whose statements depend on the answers of those before it (a listing that walks an
# index batch by batch): a generator that yields each statement, is sent its answer, and
# returns the read's answer.
Steps = Generator[Statement[Any], Any, T]


def step(statement: Statement[T]) -> Steps[T]:
    """The answer of ``statement`` in a read's steps (``yield from step(...)``), typed as the
    statement's."""
    answer: T = yield statement
    return answer


@dataclass(frozen=True, slots=True, kw_only=True)
class Read(Generic[T_co]):
    """A read of several statements, each built from the answers before it.

    ``plan`` (when given) sets planner settings for the read (``SET LOCAL``) and answers what
    they were: the read then runs in one transaction (the caller's, when there is one), and
    inside the caller's, ``restore`` puts the settings back after the read, so its later
    statements are planned as before (outside, they end with the read's own)."""

    steps: Callable[[], Steps[T_co]]
    plan: Statement[Any] | None = None
    restore: Callable[[Any], Statement[None]] | None = None


# Cached: one ``rows`` per class, so that ``run_async`` keeps one psycopg factory for it.
@cache
def rows_of(make: Callable[..., R]) -> RowsOf[R]:
    """``rows`` making each row ``make(**columns)``: a record class, or ``dict``."""
    return lambda names: lambda values: make(**dict(zip(names, values, strict=True)))


def run(cursor: CursorWrapper, statement: Statement[T]) -> T:
    """Execute ``statement`` on a Django cursor, in its connection's transaction."""
    cursor.execute(statement.sql, statement.params)
    # The rows are read from the psycopg cursor underneath: they have all arrived with the
    # result, so Django's wrapper would only add a per-call wrapper translating errors that
    # reading them cannot raise.
    return _answer(cursor.cursor, statement)


# Where Django's own ``CursorWrapper.execute`` is defined; a replacement is defined elsewhere.
_DJANGO_CURSORS: Final = "django.db.backends.utils"
# Per Django connection (one a thread and alias): the psycopg connection under it, the thread
# that made the cursor, and the cursor ``run_on`` runs its statements on. Weak, so that a
# thread's connections are not kept after the thread; the entry does not refer to its key.
_cursors: Final[weakref.WeakKeyDictionary[BaseDatabaseWrapper, tuple[Any, int, Cursor[Any]]]] = (
    weakref.WeakKeyDictionary()
)


def run_on(db: BaseDatabaseWrapper, statement: Statement[T]) -> T:
    """Execute ``statement`` on Django's connection ``db``, in its transaction.

    What Django's cursor would do around the statement, it does: the health check, the
    connection, the thread check, the refusal in a broken ``atomic()`` block
    (``TransactionManagementError``) and its errors as ``django.db``'s. It skips what costs
    calls and does nothing here: a Django cursor, and a psycopg cursor, per statement. When
    something would see the statement on a Django cursor (an ``execute_wrapper``, the query log
    of ``DEBUG`` or ``CaptureQueriesContext``, the warning before the apps are ready, a tool
    that wraps the connection's cursors or Django's cursor class), it runs on one instead.
    """
    if (
        db.execute_wrappers
        or db.queries_logged
        or not (apps.ready or apps.stored_app_configs)
        # django-debug-toolbar replaces the connection's ``cursor`` on the instance; APM
        # integrations (Sentry's, for one) replace ``CursorWrapper.execute``; a backend may
        # make its own cursors.
        or "cursor" in db.__dict__
        or CursorWrapper.execute.__module__ != _DJANGO_CURSORS
        or type(db).make_cursor is not BaseDatabaseWrapper.make_cursor
    ):
        with db.cursor() as wrapped:
            return run(wrapped, statement)
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    db.validate_no_broken_transaction()
    raw = db.connection
    thread = _thread.get_ident()
    with db.wrap_database_errors:
        kept = _cursors.get(db)
        if kept is not None and kept[0] is raw and kept[1] == thread:
            cursor = kept[2]
        else:
            # Django's own (its class and the connection's time zone; django-stubs types it as
            # the wrapper). Kept for the thread that made it: a connection shared between
            # threads (``inc_thread_sharing``) never has one cursor run two statements at once.
            cursor = cast("Cursor[Any]", db.create_cursor())
            _cursors[db] = (raw, thread, cursor)
        cursor.execute(statement.sql, statement.params)
        return _answer(cursor, statement)


def _answer(cursor: Cursor[Any], statement: Statement[T]) -> T:
    """The answer of ``statement`` from the result ``cursor`` holds (a psycopg cursor)."""
    result = cursor.pgresult
    if result is None or result.status != TUPLES_OK:
        return statement.read([])
    rows: list[Any] = cursor.fetchall()
    if not statement.json and statement.rows is None:
        # Tuples as they come (an enqueue's id): the column names are not read.
        return statement.read(rows)
    names = column_names(cursor)
    assert names is not None  # a result with rows, as checked above
    if statement.json:
        positions = [names.index(column) for column in statement.json]
        rows = [_decode_json(row, positions) for row in rows]
    if statement.rows is not None:
        make = statement.rows(names)
        rows = [make(row) for row in rows]
    return statement.read(rows)


async def run_async(conn: AsyncConnection[Any], statement: Statement[T]) -> T:
    """Execute ``statement`` on a psycopg connection (the worker's: autocommit, or the caller's
    open transaction)."""
    factory = tuple_row if statement.rows is None else _row_factory(statement.rows)
    async with conn.cursor(row_factory=factory) as cursor:
        await cursor.execute(statement.sql, statement.params, prepare=statement.prepare)
        result = cursor.pgresult
        rows = await cursor.fetchall() if result and result.status == TUPLES_OK else []
    return statement.read(rows)


def run_atomic(cursor: CursorWrapper, atomic: Atomic[T]) -> T:
    """Execute ``atomic``'s statements on a Django cursor, in one transaction."""
    with transaction.atomic(using=cursor.db.alias):
        for statement in atomic.first:
            run(cursor, statement)
        return run(cursor, atomic.last)


def run_copy(cursor: CursorWrapper, copy: Copy[Any, T]) -> T:
    """Execute ``copy`` on a Django cursor, in its connection's transaction: the reservation,
    then the rows, ``ROWS_PER_WRITE`` at a time, as ``lines`` makes them."""
    reserved = run(cursor, copy.reserve)
    # Django's wrapper does not expose COPY; its ``cursor`` attribute is the psycopg cursor.
    lines = iter(copy.lines(reserved))
    with cursor.cursor.copy(copy.sql) as stream:
        # A line is never empty (it ends with its newline), so an empty chunk is the end; the
        # slices cost no call per line.
        while chunk := "".join(islice(lines, ROWS_PER_WRITE)):
            stream.write(chunk)
    return copy.answer(reserved)


def run_read(cursor: CursorWrapper, read: Read[T]) -> T:
    """Execute ``read``'s statements on a Django cursor; with a ``plan``, in one transaction."""
    if read.plan is None:
        return _stepped(cursor, read.steps())
    callers = cursor.db.in_atomic_block
    with transaction.atomic(using=cursor.db.alias, savepoint=False):
        before = run(cursor, read.plan)
        answer = _stepped(cursor, read.steps())
        if callers and read.restore is not None:
            run(cursor, read.restore(before))
        return answer


def _stepped(cursor: CursorWrapper, steps: Steps[T]) -> T:
    # A statement that fails raises here and ends the read: no later statement would run in
    # the transaction it aborted.
    try:
        statement = next(steps)
        while True:
            statement = steps.send(run(cursor, statement))
    except StopIteration as done:
        answer: T = done.value
        return answer


async def run_atomic_async(conn: AsyncConnection[Any], atomic: Atomic[T]) -> T:
    """Execute ``atomic``'s statements on a psycopg connection, in one transaction."""
    async with conn.transaction():
        for statement in atomic.first:
            await run_async(conn, statement)
        return await run_async(conn, atomic.last)


def column_names(cursor: BaseCursor[Any, Any]) -> tuple[str, ...] | None:
    """The names of the current result's columns; None when it has no rows to fetch (a
    command). Read from the result itself, not ``cursor.description``: psycopg makes a
    ``Column`` object per column each time that is read, 25 µs for a claim's 18 columns, and the
    worker reads it for every claim and close (docs/benchmarks.md, "django.tasks drain")."""
    result = cursor.pgresult
    if result is None or result.status != TUPLES_OK:
        return None
    # A list comprehension: a generator's step per column is a Python call of its own.
    return tuple([(result.fname(i) or b"").decode() for i in range(result.nfields)])


def _decode_json(row: Sequence[Any], positions: Sequence[int]) -> tuple[Any, ...]:
    values = list(row)
    for position in positions:
        if isinstance(values[position], str):
            values[position] = json.loads(values[position])
    # A tuple, as the rows of both connections are.
    return tuple(values)


# Cached: a statement's ``rows`` is a module-level function, so each gets one psycopg factory
# instead of a new closure per execution on the hot path.
@cache
def _row_factory(rows: RowsOf[Any]) -> RowFactory[Any]:
    def factory(cursor: BaseCursor[Any, Any]) -> RowMaker[Any]:
        names = column_names(cursor)
        return no_result if names is None else rows(names)

    return factory
