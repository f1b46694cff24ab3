"""What Django's connection does around an enqueue, kept now that the enqueue runs on the
psycopg connection under it instead of through a Django cursor (#32): the execute wrappers and
the query log see it, its errors are ``django.db``'s, a broken ``atomic()`` block refuses it,
it commits and rolls back with the caller's transaction, and a connection is used only from
its own thread, never from async code, and not after it was closed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.core.exceptions import SynchronousOnlyOperation
from django.db import (
    DatabaseError,
    IntegrityError,
    connection,
    connections,
    reset_queries,
    transaction,
)
from django.db.backends.utils import CursorWrapper
from django.db.transaction import TransactionManagementError
from django.test import override_settings

import awa_django as awa
from awa_django.storage import statement as statement_module
from awa_django.storage.statement import Statement, first_int, run_on
from tests.jobs import noop

# Every insert into the ready ring fails as a unique violation would, until the savepoint that
# creates it rolls back.
REFUSE_INSERTS = """
CREATE FUNCTION pg_temp.refuse_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'unique_violation';
END $$;
CREATE TRIGGER refuse_insert BEFORE INSERT ON awa.ready_entries
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse_insert();
"""

BACKEND_PID = Statement(sql="SELECT pg_backend_pid()", read=first_int)


@pytest.mark.usefixtures("awa_db")
def test_an_execute_wrapper_sees_the_enqueue_statement():
    seen: list[str] = []

    def wrapper(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        seen.append(sql)
        return execute(sql, *args)

    noop.enqueue(n=0)  # the lane and the connection, as after any earlier enqueue
    with connection.execute_wrapper(wrapper):
        job_id = noop.enqueue(n=1)
    assert len(seen) == 1
    assert "awa.enqueue_job_alone(" in seen[0]
    assert awa.get_job(job_id) is not None


def patch_the_connections_cursor(monkeypatch: pytest.MonkeyPatch, seen: list[str]) -> None:
    """As django-debug-toolbar does: the connection's ``cursor``, replaced on the instance."""
    db = connections["default"]
    made_by = db.cursor

    def cursor() -> Any:
        made = made_by()
        execute = made.execute

        def recording(sql: str, params: Any = None) -> Any:
            seen.append(sql)
            return execute(sql, params)

        made.execute = recording
        return made

    monkeypatch.setattr(db, "cursor", cursor)


def patch_djangos_cursor_class(monkeypatch: pytest.MonkeyPatch, seen: list[str]) -> None:
    """As APM integrations (Sentry's) do: ``CursorWrapper.execute``, replaced on the class."""
    execute = CursorWrapper.execute

    def recording(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        seen.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", recording)


def patch_the_backends_cursors(monkeypatch: pytest.MonkeyPatch, seen: list[str]) -> None:
    """As a backend built on Django's may do: cursors of its own (``make_cursor``)."""
    backend = type(connections["default"])
    make_cursor = backend.make_cursor

    def making(self: Any, cursor: Any) -> Any:
        made = make_cursor(self, cursor)
        seen.append("made")
        return made

    monkeypatch.setattr(backend, "make_cursor", making)


@pytest.mark.usefixtures("awa_db")
@pytest.mark.parametrize(
    "patch", [patch_the_connections_cursor, patch_djangos_cursor_class, patch_the_backends_cursors]
)
def test_tools_that_wrap_djangos_cursors_see_the_enqueue(monkeypatch, patch):
    seen: list[str] = []
    noop.enqueue(n=0)
    patch(monkeypatch, seen)
    job_id = noop.enqueue(n=1)
    assert len(seen) == 1
    assert "awa.enqueue_job_alone(" in seen[0] or seen[0] == "made"
    assert awa.get_job(job_id) is not None


@pytest.mark.usefixtures("awa_db")
def test_debug_lists_the_enqueue_in_connection_queries():
    noop.enqueue(n=0)
    with override_settings(DEBUG=True):
        reset_queries()
        noop.enqueue(n=1)
        logged = [query["sql"] for query in connection.queries]
    assert len(logged) == 1
    assert "awa.enqueue_job_alone(" in logged[0]


@pytest.mark.django_db
def test_a_database_error_of_the_enqueue_arrives_as_django_dbs_class():
    noop.enqueue(n=0)
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(REFUSE_INSERTS)
        noop.enqueue(n=1)
    assert isinstance(raised.value.__cause__, psycopg.errors.UniqueViolation)
    assert "refused by the test" in str(raised.value)


@pytest.mark.django_db
def test_an_enqueue_in_a_broken_atomic_block_is_refused():
    noop.enqueue(n=0)
    with transaction.atomic():
        transaction.set_rollback(True)
        with pytest.raises(TransactionManagementError):
            noop.enqueue(n=1)


@pytest.mark.usefixtures("awa_db")
def test_an_enqueue_in_a_savepoint_rolls_back_with_it_and_not_the_outer_block():
    class Boom(Exception):
        pass

    with transaction.atomic():
        kept = noop.enqueue(n=1)
        with pytest.raises(Boom), transaction.atomic():
            rolled_back = noop.enqueue(n=2)
            raise Boom
    assert awa.get_job(kept) is not None
    assert awa.get_job(rolled_back) is None


@pytest.mark.usefixtures("awa_db")
def test_a_closed_connection_is_opened_again_for_the_next_enqueue():
    first = noop.enqueue(n=1)
    connection.close()
    second = noop.enqueue(n=2)
    assert [job.job_id for job in awa.get_jobs([first, second])] == [first, second]


@pytest.mark.usefixtures("awa_db")
def test_an_enqueue_from_async_code_is_refused():
    noop.enqueue(n=0)

    async def enqueue_in_the_event_loop() -> int:
        return noop.enqueue(n=1)

    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(enqueue_in_the_event_loop())


@pytest.mark.usefixtures("awa_db")
def test_a_connection_runs_statements_only_in_its_thread_unless_shared():
    db = connections["default"]
    own = run_on(db, BACKEND_PID)
    answers: list[object] = []

    def in_another_thread() -> None:
        try:
            answers.append(run_on(db, BACKEND_PID))
            answers.append(statement_module._cursors[db][2])
        except DatabaseError as error:
            answers.append(error)

    def run_in_another_thread() -> None:
        thread = threading.Thread(target=in_another_thread)
        thread.start()
        thread.join()

    run_in_another_thread()
    assert len(answers) == 1
    assert isinstance(answers[0], DatabaseError)
    assert "can only be used in that same thread" in str(answers[0])

    answers.clear()
    mine = statement_module._cursors[db][2]
    db.inc_thread_sharing()
    try:
        run_in_another_thread()
    finally:
        db.dec_thread_sharing()
    # The same session, on a cursor of the other thread's own: one cursor never serves two
    # threads at once.
    assert answers[0] == own
    assert answers[1] is not mine
    assert run_on(db, BACKEND_PID) == own
    assert statement_module._cursors[db][2] is not answers[1]
