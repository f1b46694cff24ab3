"""awa's system checks in the smallest project that installs it: contenttypes, auth and
awa_django, no ROOT_URLCONF, no admin (a worker-only settings module). ``manage.py check`` and
``migrate`` run as real subprocesses, on a database of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fresh_project import ROOT, fresh_database, project_env, run_django

SETTINGS = """
SECRET_KEY = "minimal-settings-test"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "awa_django"]
DATABASES = {databases}
USE_TZ = True
AWA = {{"QUEUES": {{"default": {{"concurrency": 2}}}}}}
"""


@pytest.fixture
def minimal_project(tmp_path: Path) -> Iterator[dict[str, str]]:
    with fresh_database("awa_minimal") as database:
        settings = SETTINGS.format(databases=database.databases_setting())
        (tmp_path / "minimal_settings.py").write_text(settings)
        yield project_env("minimal_settings", tmp_path, ROOT)


def test_check_and_migrate_run_without_root_urlconf(minimal_project):
    check = run_django(minimal_project, ["check"])
    assert check.returncode == 0, check.stderr
    assert "Traceback" not in check.stderr
    migrate = run_django(minimal_project, ["migrate", "--no-input"])
    assert migrate.returncode == 0, migrate.stderr
    assert "Applying awa_django.0001" in migrate.stdout
    # migrate runs the database checks before applying anything: none may report the
    # migrations it is about to apply.
    assert "awa." not in migrate.stdout + migrate.stderr
    after = run_django(minimal_project, ["check", "--database", "default"])
    assert after.returncode == 0, after.stderr
    assert "awa." not in after.stdout + after.stderr


def test_workers_refuse_to_start_before_migrate(minimal_project):
    for command in (["awa_worker", "--burst"], ["awa_maintenance"]):
        refused = run_django(minimal_project, command)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "Traceback" not in refused.stderr
        assert "awa_django migrations are not applied on database 'default'" in refused.stderr
        assert "pending: 0001_substrate, 0002_admin_models" in refused.stderr
        assert "python manage.py migrate --database default" in refused.stderr
    assert run_django(minimal_project, ["migrate", "--no-input"]).returncode == 0
    drained = run_django(minimal_project, ["awa_worker", "--burst"])
    assert drained.returncode == 0, drained.stderr
