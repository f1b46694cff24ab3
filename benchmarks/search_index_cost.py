"""What the admin's search indexes cost a bulk enqueue and a drain, in load-independent counts.

Usage (a throwaway durable server with pg_stat_statements)::

    WITH_POSTGRES_OPTIONS="-c full_page_writes=on -c autovacuum=off \\
        -c shared_preload_libraries=pg_stat_statements" \\
    .venv/bin/python scripts/with_postgres.py -- \\
        .venv/bin/python -m benchmarks.search_index_cost [--batches 50] [--batch 1000]

For each variant of the search indexes it enqueues ``--batches`` x ``--batch`` jobs with the
side-by-side benchmark's arguments (``benchmarks.scenarios.job_args``, one ``enqueue_many`` per
batch), then drains them with ``awa_worker --burst``, and prints per job: WAL bytes and records
(``pg_current_wal_lsn`` and pg_stat_statements), shared buffers hit and dirtied by the
statements, and the size of the ready ring's argument indexes with their GIN pending list.
Autovacuum is off so that the pending list's merge is counted where it happens: in the enqueue
when an enqueue did it, else on its own (``gin_clean_pending_list``). The variants are applied
in order, each on top of the one before. Timings are not printed: on a shared machine they mean
nothing; the counts do not depend on load.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from awa_django import sql

VARIANTS: dict[str, str] = {
    # The schema as migrated: every search index present.
    "as migrated": "",
    # The storage options of migration 0024, before 0028 raised the pending-list limit.
    "before 0028": sql.migration("0028_search_index_cost", "down"),
    # The ready ring's argument index without a pending list: each key into the entry tree.
    "ready args index, fastupdate off": (
        "DO $$ DECLARE i regclass; BEGIN"
        " FOR i IN SELECT c.oid FROM pg_class c WHERE c.relname ~ '^ready_entries_[0-9]+_args'"
        " LOOP EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', i); END LOOP; END $$"
    ),
    # The ready ring's argument index dropped: the one index a plain enqueue pays for.
    "without ready args index": "DROP INDEX awa.ready_entries_args",
    # The ring's other search indexes dropped too: those on the rows a drain writes (closures)
    # and on the rows of retries and cancels.
    "without ring search indexes": (
        "DROP INDEX awa.ready_entries_tags,"
        " awa.ready_entries_error_text, awa.done_entries_error_text,"
        " awa.ready_tombstones_reason"
    ),
}


def _scalar(cursor: Any, sql: str) -> Any:
    cursor.execute(sql)
    return cursor.fetchone()[0]


def _ring_index_sizes(cursor: Any) -> dict[str, int]:
    cursor.execute(
        "SELECT coalesce(sum(pg_relation_size(i.indexrelid)), 0)::bigint"
        "  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname ~ '^ready_entries_[0-9]+_args'"
    )
    size = int(cursor.fetchone()[0])
    cursor.execute(
        "SELECT coalesce(sum((pgstatginindex(c.oid)).pending_pages), 0)::bigint"
        "  FROM pg_class c WHERE c.relname ~ '^ready_entries_[0-9]+_args'"
    )
    return {"args_index_bytes": size, "pending_pages": int(cursor.fetchone()[0])}


def _statements(cursor: Any) -> dict[str, int]:
    cursor.execute(
        "SELECT coalesce(sum(shared_blks_hit), 0), coalesce(sum(shared_blks_dirtied), 0),"
        "       coalesce(sum(wal_records), 0), coalesce(sum(wal_fpi), 0)"
        "  FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database"
        "                                         WHERE datname = current_database())"
        "   AND query !~* 'pg_stat_statements|pg_current_wal_lsn|pgstatginindex'"
    )
    hit, dirtied, records, fpi = cursor.fetchone()
    return {"blks_hit": hit, "blks_dirtied": dirtied, "wal_records": records, "wal_fpi": fpi}


def _measured(work: Any) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
        cursor.execute("SELECT pg_stat_statements_reset()")
        start = _scalar(cursor, "SELECT pg_current_wal_lsn()")
    work()
    # A cursor of its own: the worker closes the connections it found open.
    with connection.cursor() as cursor:
        wal = int(_scalar(cursor, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{start}')"))
        return {"wal_bytes": wal, **_statements(cursor)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--no-drain", action="store_true")
    options = parser.parse_args()
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    import awa_django as awa
    from awa_django.testing import reset_queue
    from benchmarks.jobs import SYNC_KIND
    from benchmarks.scenarios import job_args

    jobs = options.batches * options.batch
    batches = [
        [job_args(b * options.batch + i) for i in range(options.batch)]
        for b in range(options.batches)
    ]
    call_command("migrate", verbosity=0, interactive=False)
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
    for name, ddl in VARIANTS.items():
        if ddl:
            with connection.cursor() as cursor:
                cursor.execute(ddl)
        if name not in options.variants:
            continue
        reset_queue()

        def enqueue() -> None:
            for args_list in batches:
                awa.enqueue_many(SYNC_KIND, args_list)

        def merge() -> None:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT gin_clean_pending_list(c.oid) FROM pg_class c"
                    " WHERE c.relname ~ '^ready_entries_[0-9]+_args'"
                )

        def drain() -> None:
            call_command("awa_worker", "--burst", "--queue", "bench=32", verbosity=0)

        rows = [("enqueue", _measured(enqueue))]
        with connection.cursor() as cursor:
            sizes = _ring_index_sizes(cursor)
        rows.append(("pending-list merge", _measured(merge)))
        if not options.no_drain:
            rows.append(("drain", _measured(drain)))
        print(f"== {name}: {jobs} jobs; after enqueue {sizes}")
        for label, counts in rows:
            per_job = ", ".join(f"{k} {v / jobs:.2f}" for k, v in counts.items())
            print(f"   {label:<20} per job: {per_job}")


if __name__ == "__main__":
    main()
