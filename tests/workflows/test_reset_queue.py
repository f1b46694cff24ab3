"""``reset_queue`` empties the workflow tables too, whichever of them hold rows: a group has
steps but no edges, and PostgreSQL truncates a referenced table only with its referencing ones."""

from __future__ import annotations

import pytest
from django.db import connection

import awa_django as awa
from awa_django.testing import reset_queue
from tests.workflows.jobs import add

pytestmark = pytest.mark.usefixtures("awa_db")


def count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM awa.{table}")
        return int(cursor.fetchone()[0])


def test_a_group_without_edges_is_reset():
    awa.group(awa.call(add, x=1), awa.call(add, x=2)).enqueue()
    assert count("workflow_steps") == 2
    assert count("workflow_edges") == 0

    reset_queue()

    assert (count("workflows"), count("workflow_steps")) == (0, 0)
