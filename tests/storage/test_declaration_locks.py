"""Republishing declarations that did not change locks nothing (#37): every worker of a fleet
republishes the same queue policies and descriptors, and an upsert that conflicts locks the
row even when it then writes nothing, so a fleet's processes queued up behind each other's
transactions (a hundred workers: ten pool connections at a time waiting on those rows)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg import AsyncConnection

from awa_django.conf import get_settings
from awa_django.declarations.jobs import registry
from awa_django.ops.descriptors import declared
from awa_django.storage.connections import connection_kwargs
from awa_django.storage.runtime import publish_declarations
from awa_django.storage.statement import run_async

pytestmark = pytest.mark.usefixtures("awa_db")


async def connect() -> AsyncConnection[Any]:
    return await AsyncConnection.connect(**connection_kwargs("default"), autocommit=True)


async def publish(conn, declarations):
    await run_async(conn, publish_declarations(declarations))


def test_unchanged_declarations_are_republished_while_another_worker_holds_its_transaction():
    declarations = declared(get_settings(), registry.jobs())
    assert declarations.queues and declarations.kinds

    async def scenario() -> None:
        holder, other = await connect(), await connect()
        try:
            await publish(holder, declarations)  # the rows exist
            async with holder.transaction():
                # A worker republishing, its transaction not yet committed.
                await publish(holder, declarations)
                await other.execute("SET lock_timeout = '500ms'")
                await publish(other, declarations)
        finally:
            await holder.close()
            await other.close()

    asyncio.run(scenario())


def test_a_declaration_that_changed_is_still_written():
    declarations = declared(get_settings(), registry.jobs())
    queue, kind = declarations.queues[0], declarations.kinds[0]

    async def scenario() -> tuple[str, str, bool]:
        conn = await connect()
        try:
            await publish(conn, declarations)
            await conn.execute(
                "UPDATE awa.queue_descriptors SET descriptor_hash = 'old' WHERE queue = %s",
                [queue.queue],
            )
            await conn.execute(
                "UPDATE awa.kind_descriptors SET descriptor_hash = 'old' WHERE kind = %s",
                [kind.kind],
            )
            await conn.execute(
                "UPDATE awa.queue_meta SET dlq_enabled = NOT %s WHERE queue = %s",
                [queue.dlq, queue.queue],
            )
            await publish(conn, declarations)
            cursor = await conn.execute(
                "SELECT (SELECT descriptor_hash FROM awa.queue_descriptors WHERE queue = %s),"
                " (SELECT descriptor_hash FROM awa.kind_descriptors WHERE kind = %s),"
                " (SELECT dlq_enabled FROM awa.queue_meta WHERE queue = %s)",
                [queue.queue, kind.kind, queue.queue],
            )
            row = await cursor.fetchone()
            assert row is not None
            return row
        finally:
            await conn.close()

    assert asyncio.run(scenario()) == (queue.hash, kind.hash, queue.dlq)
