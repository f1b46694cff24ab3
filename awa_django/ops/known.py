"""Which queue and kind names exist, for operators typing them.

A queue is known when ``AWA["QUEUES"]`` declares it or the database holds it (a control row,
which every worker serving it writes, any job of it, a kept leader sample of it, or an attempt
of it closed in the last hour): a queue another service declares, or one removed from the
settings while it still holds jobs, stays reachable, and so does every queue the queue health
page lists, even one emptied since the leader last sampled it. A kind is known when
a handler of this process registers it, a worker published its descriptor, or the database
holds a job of it. The cheap sources are asked first; the job lookup reads ``awa.jobs`` and
only runs for a name the others do not know (usually a typo).
"""

from __future__ import annotations

from typing import Final

from django.db import connections

from awa_django.conf import get_settings
from awa_django.declarations.discovery import ensure_jobs_discovered
from awa_django.declarations.jobs import registry
from awa_django.ops.descriptors import kinds
from awa_django.ops.records import list_jobs
from awa_django.storage.samples import meta_rows, queue_seen
from awa_django.storage.statement import run

# The queue health page lists the queues with attempts closed over the last hour.
SEEN_WINDOW_S: Final = 3600.0


def queue_known(name: str, *, database: str | None = None) -> bool:
    """Whether ``name`` is declared or held by ``database`` (default: the queue's database)."""
    conf = get_settings()
    if name in conf.QUEUES:
        return True
    alias = conf.operator_database(database, queue=name)
    with connections[alias].cursor() as cursor:
        if name in run(cursor, meta_rows()):
            return True
        if list_jobs(queue=name, limit=1, database=alias):
            return True
        return run(cursor, queue_seen(queue=name, window_s=SEEN_WINDOW_S))


def kind_known(name: str, *, database: str | None = None) -> bool:
    """Whether ``name`` is registered here, or published or held by ``database`` (default
    ``AWA["DATABASE_ALIAS"]``)."""
    ensure_jobs_discovered()
    if any(job.kind == name for job in registry.jobs()):
        return True
    if any(descriptor.kind == name for descriptor in kinds(database=database)):
        return True
    return bool(list_jobs(kind=name, limit=1, database=database))


def unknown_queue_message(name: str) -> str:
    """What an operator is told about a queue ``queue_known`` does not know."""
    declared = sorted(get_settings().QUEUES)
    return (
        f"unknown queue {name!r}: not declared in AWA['QUEUES'] (declared: {declared}), and "
        "the database holds no job, control row or recent sample of it"
    )
