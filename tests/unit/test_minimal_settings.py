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
    after = run_django(minimal_project, ["check", "--database", "default"])
    assert after.returncode == 0, after.stderr
    assert "awa." not in after.stdout + after.stderr
