"""The SQL block parser, and that every named block is used by the storage layer."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from awa_django import sql

STORAGE = Path(sql.__file__).resolve().parent.parent / "storage"
QUERY_DIR = Path(sql.__file__).resolve().parent / "queries"


def test_parse_blocks_splits_on_headers():
    blocks = sql.parse_blocks("-- name: one\n-- about one\nSELECT 1\n\n-- name: two\nSELECT 2\n")
    assert blocks == {"one": "-- about one\nSELECT 1", "two": "SELECT 2"}


def test_duplicate_block_names_are_rejected():
    with pytest.raises(ValueError, match="duplicate"):
        sql.parse_blocks("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")


def test_a_block_includes_another_written_once():
    blocks = sql.parse_blocks(
        "-- name: filter\n-- which rows\nd.queue = %(queue)s\n\n"
        "-- name: one\nSELECT 1 FROM d WHERE {{filter}}\n\n"
        "-- name: two\nSELECT 2 FROM d WHERE {{filter}} AND true\n"
    )
    assert blocks["one"] == "SELECT 1 FROM d WHERE d.queue = %(queue)s"
    assert blocks["two"] == "SELECT 2 FROM d WHERE d.queue = %(queue)s AND true"


def test_a_block_includes_a_shared_fragment_unless_its_file_has_one_of_the_name():
    shared = {"waiting": "-- which rows\nr.waits", "filter": "r.shared"}
    blocks = sql.parse_blocks(
        "-- name: filter\nr.own\n\n"
        "-- name: one\nSELECT 1 FROM r WHERE {{waiting}} AND {{filter}}\n",
        shared,
    )
    assert blocks["one"] == "SELECT 1 FROM r WHERE r.waits AND r.own"


def test_the_waiting_rows_are_one_function_in_every_file():
    # Read after each lane's claim cursor (awa.waiting_entries), never written out again.
    for plane, name in (
        ("lanes", "lane_backlog"),
        ("queue", "queue_depths"),
        ("control", "drain_candidates"),
        ("browse", "count_available"),
    ):
        block = sql.queries(plane)[name]
        assert "awa.waiting_entries(" in block, name
        assert "awa.claim_receipts" not in block, name
    assert "awa.waiting_entries(p_queue)" in sql.functions("dlq")


def test_an_unknown_include_is_rejected():
    with pytest.raises(ValueError, match="missing"):
        sql.parse_blocks("-- name: a\nSELECT 1 WHERE {{missing}}\n")


@pytest.mark.parametrize("plane", sorted(p.stem for p in QUERY_DIR.glob("*.sql")))
def test_every_block_is_used(plane):
    source = "\n".join(p.read_text() for p in STORAGE.glob("*.py"))
    # A fragment is used through the blocks that include it: a shared one, those of any file.
    files = QUERY_DIR.glob("*.sql") if plane == sql.FRAGMENTS else [QUERY_DIR / f"{plane}.sql"]
    text = "\n".join(p.read_text() for p in files)
    unused = [
        name
        for name in sql.queries(plane)
        if not re.search(rf"[\"']{name}[\"']", source) and f"{{{{{name}}}}}" not in text
    ]
    assert unused == []


def test_the_unknown_kind_index_and_its_query_spell_the_error_type_as_the_worker_writes_it():
    # The planner only uses a partial index for a query that repeats its predicate literally.
    from awa_django.core.unknown_kinds import UNKNOWN_KIND_ERROR_TYPE

    predicate = f"errors -> -1 ->> 'type' = '{UNKNOWN_KIND_ERROR_TYPE}'"
    assert predicate in sql.queries("backlog")["kinds_nobody_runs"]
    assert predicate in sql.migration("0012_unknown_kinds", "up")
