"""The SQL layout the migrations rely on (docs/architecture.md, "SQL layout and schema
changes"): every function file is applied by migration 0001, holds only re-appliable
definitions, and defines each function in one place."""

from __future__ import annotations

import importlib
import re
from importlib import resources

import pytest
from django.db import connection, transaction

from awa_django import sql
from tests.migrations.catalog import schema_catalog

initial = importlib.import_module("awa_django.migrations.0001_substrate")

SQL_ROOT = resources.files(sql)
DEFINITION = re.compile(r"^CREATE OR REPLACE (FUNCTION|VIEW) (awa\.[a-z_]+)", re.MULTILINE)
STATEMENT_START = re.compile(r"^(CREATE|ALTER|DROP|INSERT|UPDATE|DELETE|TRUNCATE|DO|GRANT)\b", re.M)


def function_files() -> list[str]:
    return sorted(
        entry.name.removesuffix(".sql")
        for entry in SQL_ROOT.joinpath("functions").iterdir()
        if entry.name.endswith(".sql")
    )


def ddl_files(migration: str) -> list[str]:
    return sorted(
        entry.name.removesuffix(".sql")
        for entry in SQL_ROOT.joinpath("migrations", migration).iterdir()
        if entry.name.endswith(".sql")
    )


# Function files added after 0001 was released (which is never edited), each applied first by
# the migration named.
ADDED_LATER = {"workflows": "0013_workflows"}


def test_migration_0001_applies_every_file_of_its_directory_and_every_function_file():
    assert sorted([*initial.FUNCTIONS, *ADDED_LATER]) == function_files()
    for plane, name in ADDED_LATER.items():
        text = SQL_ROOT.joinpath("functions", f"{plane}.sql").read_text()
        operations = importlib.import_module(f"awa_django.migrations.{name}").Migration.operations
        assert any(text in str(getattr(op, "sql", "")) for op in operations), (plane, name)
    assert sorted([*initial.SCHEMA, "triggers", "down"]) == ddl_files("0001_substrate")


def test_function_files_hold_only_create_or_replace_definitions_each_in_one_file():
    defined: dict[str, str] = {}
    for plane in function_files():
        text = SQL_ROOT.joinpath("functions", f"{plane}.sql").read_text()
        names = [match.group(2) for match in DEFINITION.finditer(text)]
        assert names, f"{plane}.sql defines nothing"
        # Every statement at the start of a line outside a body is a definition.
        starts = [m.start() for m in STATEMENT_START.finditer(text)]
        definitions = [m.start() for m in DEFINITION.finditer(text)]
        assert starts == definitions, f"{plane}.sql holds a statement other than a definition"
        # Overloads of one name (a form kept for older callers) stand side by side in its file.
        for name in names:
            where = defined.get(name, plane)
            assert where == plane, f"{name} is defined in {where} and {plane}"
            defined[name] = plane


@pytest.mark.django_db
def test_applying_a_function_file_again_changes_nothing():
    with connection.cursor() as cursor:
        before = schema_catalog(cursor)
        for plane in function_files():
            with transaction.atomic():
                cursor.execute(sql.functions(plane))
        assert schema_catalog(cursor) == before
