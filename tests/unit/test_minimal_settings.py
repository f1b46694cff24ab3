"""awa's system checks in the smallest projects that install it, run as real ``manage.py``
subprocesses on a database of their own: contenttypes, auth and awa_django without
ROOT_URLCONF (a worker-only settings module), with URLs but no admin, with the admin but no
callback URLs, and with the callback URLs mounted. Every check either applies or stays silent
for a reason it can tell (no URLs, no endpoint); none may crash the command."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fresh_project import ROOT, fresh_database, project_env, run_django

SETTINGS = """
SECRET_KEY = "minimal-settings-test"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "awa_django"{apps}]
DATABASES = {databases}
USE_TZ = True
AWA = {{"QUEUES": {{"default": {{"concurrency": 2}}}}}}
{extra}
"""

ADMIN_APPS = ', "django.contrib.admin", "django.contrib.sessions", "django.contrib.messages"'
ADMIN_EXTRA = """
ROOT_URLCONF = "shape_urls"
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
"""

# name: (extra INSTALLED_APPS, extra settings, urls.py or None)
SHAPES = {
    "no_root_urlconf": ("", "", None),
    "urls_without_admin": ("", 'ROOT_URLCONF = "shape_urls"', "urlpatterns = []\n"),
    "admin_without_callback_urls": (
        ADMIN_APPS,
        ADMIN_EXTRA,
        "from django.contrib import admin\nfrom django.urls import path\n"
        'urlpatterns = [path("admin/", admin.site.urls)]\n',
    ),
    "callback_urls_mounted": (
        ADMIN_APPS,
        ADMIN_EXTRA,
        "from django.contrib import admin\nfrom django.urls import include, path\n"
        'urlpatterns = [path("admin/", admin.site.urls),\n'
        '               path("awa/", include("awa_django.urls"))]\n',
    ),
}


def write_project(directory: Path, shape: str, databases: str) -> dict[str, str]:
    apps, extra, urls = SHAPES[shape]
    directory.mkdir()
    settings = SETTINGS.format(apps=apps, databases=databases, extra=extra)
    (directory / "shape_settings.py").write_text(settings)
    if urls is not None:
        (directory / "shape_urls.py").write_text(urls)
    return project_env("shape_settings", directory, ROOT)


@pytest.fixture
def database_setting() -> Iterator[str]:
    with fresh_database("awa_minimal") as database:
        yield database.databases_setting()


@pytest.fixture
def minimal_project(tmp_path: Path, database_setting: str) -> dict[str, str]:
    return write_project(tmp_path / "project", "no_root_urlconf", database_setting)


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


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("no_root_urlconf", []),
        ("urls_without_admin", []),
        ("admin_without_callback_urls", []),
        # Mounted without CALLBACK_SECRET: the endpoint refuses everything, and says so.
        ("callback_urls_mounted", ["awa.W050"]),
    ],
)
def test_check_in_each_settings_shape(tmp_path, database_setting, shape, expected):
    env = write_project(tmp_path / shape, shape, database_setting)
    for args in (["check"], ["check", "--deploy"], ["check", "--database", "default"]):
        check = run_django(env, args)
        output = check.stdout + check.stderr
        assert check.returncode == 0, output
        assert "Traceback" not in output
        reported = sorted(
            {word.rstrip(":)") for word in output.split() if word.startswith("(awa.")}
        )
        # A minimal project keeps Django's CONN_MAX_AGE of 0, which --deploy warns about.
        deploy_only = ["awa.W054"] if "--deploy" in args else []
        assert reported == [f"({id}" for id in sorted(expected + deploy_only)], output
