"""Before ``migrate``, every operator command and ``enqueue`` answer with the one line the
worker gives ("awa_django migrations are not applied ... Run: python manage.py migrate"), never
with a traceback from the first statement that met no ``awa`` schema. Real ``manage.py``
processes on a database of their own, where no migration has run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fresh_project import FreshDatabase, fresh_database
from tests.ops.helpers import manage

COMMANDS = [
    ["awa_queues"],
    ["awa_queues", "--json"],
    ["awa_audit"],
    ["awa_dlq", "list"],
    ["awa_jobs", "list"],
    ["awa_cron", "list"],
    ["awa_enqueue", "shop.send_receipt", "--args", '{"order_id": 1}'],
    ["awa_queue", "pause", "default"],
    ["awa_shards", "default"],
    ["awa_workflows", "list"],
    ["awa_worker", "--burst"],
    ["awa_maintenance"],
]

ENQUEUE = (
    "import awa_django as awa\n"
    "try:\n"
    "    awa.enqueue('shop.send_receipt', args={'order_id': 1})\n"
    "except awa.NotMigrated as exc:\n"
    "    print('NotMigrated:', exc)\n"
)


def database_url(database: FreshDatabase) -> str:
    auth = database.user + (f":{database.password}" if database.password else "")
    return f"postgres://{auth}@{database.host}:{database.port}/{database.name}"


@pytest.fixture(scope="module")
def unmigrated() -> Iterator[dict[str, str]]:
    with fresh_database("awa_unmigrated") as database:
        yield {"DATABASE_URL": database_url(database)}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_before_migrate_says_to_migrate_in_one_line(command, unmigrated):
    refused = manage(*command, env=unmigrated)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "awa_django migrations are not applied on database 'default'" in lines[0]
    assert "pending: 0001_substrate, 0002_admin_models" in lines[0]
    assert lines[0].endswith("Run: python manage.py migrate --database default")


def test_enqueue_before_migrate_raises_not_migrated(unmigrated):
    done = manage("shell", "-c", ENQUEUE, env=unmigrated)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    # Django's shell may print what it imported first.
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith(
        "NotMigrated: awa_django migrations are not applied on database 'default' "
    )
    assert 'schema "awa" does not exist' in line
    assert line.endswith("Run: python manage.py migrate --database default")


def test_not_migrated_is_the_database_error_it_replaces(unmigrated):
    """Code that catches Django's ProgrammingError (or DatabaseError) still catches it."""
    check = ENQUEUE.replace("awa.NotMigrated", "__import__('django.db').db.ProgrammingError")
    done = manage("shell", "-c", check, env=unmigrated)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("NotMigrated: awa_django migrations are not applied")
