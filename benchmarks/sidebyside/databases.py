"""Each system's own database, recreated from a freshly installed template for every run.

The template is installed once per harness run (``DROP`` / ``CREATE`` / the system's own
installer); every measurement then starts from ``CREATE DATABASE ... TEMPLATE``, a file copy,
so each repetition gets a fresh schema in an identical state without paying the installer again.
Database names derive from ``DATABASE_URL``'s (or ``--db-prefix``): ``<name>_sbs_<system>``
and ``<name>_sbs_<system>_tpl``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from benchmarks.sidebyside.systems.base import System

DEAD_TUPLES = "SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE "


class Databases:
    """Names and lifecycle of the per-system databases on the server of ``base_url``."""

    def __init__(self, base_url: str, prefix: str | None = None) -> None:
        self.base_url = base_url
        # A URL, as DATABASE_URL is everywhere in this project: Django's settings parse it too.
        self._parts = urlsplit(base_url)
        self.base_name = prefix or self._parts.path.lstrip("/") or "postgres"

    def name(self, system: System, template: bool = False) -> str:
        return f"{self.base_name}_sbs_{system.name}" + ("_tpl" if template else "")

    def url(self, system: System, template: bool = False) -> str:
        return urlunsplit(self._parts._replace(path="/" + self.name(system, template)))

    def _admin(self) -> psycopg.Connection[Any]:
        # CREATE/DROP DATABASE need a connection to another database of the same server.
        return psycopg.connect(self.base_url, autocommit=True)

    def _recreate(self, name: str, template: str | None = None) -> None:
        with self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            if template is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            else:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(template)
                    )
                )

    def install_template(self, system: System) -> None:
        """Install the system into a new database, then make that the template."""
        self._recreate(self.name(system))
        system.install(self.url(system))
        system.close()
        self._recreate(self.name(system, template=True), template=self.name(system))

    def fresh(self, system: System) -> str:
        """Recreate the system's database from its template; returns its URL."""
        self._recreate(self.name(system), template=self.name(system, template=True))
        return self.url(system)

    def drop_all(self, system: System) -> None:
        with self._admin() as conn:
            for template in (False, True):
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(self.name(system, template))
                    )
                )


def dead_tuples(conn: psycopg.Connection[Any], system: System) -> int:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(DEAD_TUPLES + system.tables_predicate).fetchone()  # type: ignore[arg-type]
    return int(row[0]) if row else 0
