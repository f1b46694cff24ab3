"""What the awa schema consists of, as comparable text: every relation, column (type,
nullability, default, position among the live columns), constraint, index, trigger, type,
function definition and view definition. Two databases with equal catalogs hold the same
schema. The lanes' commit sequences (``awa.lane_<md5>``, created on a lane's first use) are data,
not schema, and are left out."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.migrations.loader import MigrationLoader

CATALOG_SQL = """
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = 'awa'),
rels AS (
    SELECT c.oid, c.relname, c.relkind FROM pg_class c
     WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relname !~ '^lane_[0-9a-f]{32}$'
)
SELECT c.relkind::text || ':' || c.relname FROM rels c
UNION ALL
-- Position among the live columns: a column dropped by a reversed migration and added again
-- leaves a hole in attnum but the same order.
SELECT 'column:' || c.relname || '.' || a.attname || ' '
       || row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum) || ' '
       || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
  FROM pg_attribute a
  JOIN rels c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint:' || conrelid::regclass::text || '.' || conname || ' '
       || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT 'index:' || pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT 'trigger:' || pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace IN (SELECT oid FROM ns) AND NOT t.tgisinternal
UNION ALL
SELECT 'type:' || t.typname
  FROM pg_type t
  LEFT JOIN pg_class c ON c.oid = t.typrelid
 WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typtype IN ('c', 'e', 'd')
   AND (c.oid IS NULL OR c.relkind = 'c')
UNION ALL
SELECT 'function:' || p.oid::regprocedure::text || ' ' || md5(pg_get_functiondef(p.oid))
  FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)
UNION ALL
SELECT 'view:' || c.relname || ' ' || md5(pg_get_viewdef(c.oid))
  FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind = 'v'
ORDER BY 1
"""


def schema_catalog(cursor: Any) -> list[str]:
    """The catalog of schema ``awa`` seen through ``cursor`` (Django's or psycopg's)."""
    cursor.execute(CATALOG_SQL)
    return [row[0] for row in cursor.fetchall()]


def current_catalog() -> list[str]:
    """The catalog of the test database's awa schema, as it stands."""
    with connection.cursor() as cursor:
        return schema_catalog(cursor)


def migration_before(migration: str) -> str:
    """The migration ``migration`` depends on last (the lead may reorder the chain at merge)."""
    loader = MigrationLoader(connection)
    return str(loader.get_migration("awa_django", migration).dependencies[-1][1])


def claim_ready_source() -> str:
    """The body of ``awa.claim_ready`` as the test database has it now."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = 'awa.claim_ready(text, integer, text,"
            " double precision, double precision, boolean)'::regprocedure"
        )
        return str(cursor.fetchone()[0])
