"""What users install: the built wheel, pip-installed with its dependencies into a fresh
virtualenv outside the checkout, runs a project of its own there. ``check``, ``migrate``, an
enqueue, ``awa_worker --burst`` and a logged-in GET of every awa admin page run with that
virtualenv's Python, from a directory outside the checkout, with only the project on
PYTHONPATH, so nothing can come from the checkout (templates, SQL, the URL modules)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import django

from tests.deployment.dists import ROOT
from tests.fresh_project import fresh_database, project_env, run_django

SETTINGS = """
SECRET_KEY = "installed-wheel-test"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "awa_django",
    "greetings",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "mysite.urls"
TEMPLATES = [
    {{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {{
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        }},
    }},
]
DATABASES = {databases}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"
AWA = {{
    "QUEUES": {{"default": {{"concurrency": 2}}, "doomed": {{"concurrency": 1, "dlq": True}}}},
    "CALLBACK_SECRET": "0123456789abcdef" * 4,
}}
"""

URLS = """
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("awa/", include("awa_django.urls")),
]
"""

JOBS = """
import awa_django as awa


@awa.job
def hello(ctx: awa.JobContext, n: int) -> int:
    return n * 2


@awa.job(queue="doomed")
def doomed(ctx: awa.JobContext) -> None:
    raise awa.TerminalError("meant to land in the dead-letter queue")
"""

ENQUEUE = """
import json
from greetings.jobs import doomed, hello
print(json.dumps({"hello": hello.enqueue(n=21), "doomed": doomed.enqueue()}))
"""

STATES = """
import json
import awa_django as awa
print(json.dumps({{name: awa.get_job(job_id).state for name, job_id in {ids!r}.items()}}))
"""

# Every awa admin page (awa_django/admin/: six model admins, two with a detail page) and the
# app's index, GET as a logged-in superuser; written as JSON to a file beside the project.
ADMIN_PAGES = """
import json
from pathlib import Path
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

client = Client()
client.force_login(User.objects.create_superuser("operator", password="pw"))
pages = {{
    "app index": reverse("admin:app_list", kwargs={{"app_label": "awa_django"}}),
    "jobs": reverse("admin:awa_django_job_changelist"),
    "job detail": reverse("admin:awa_django_job_change", args=[{hello}]),
    "dead-letter queue": reverse("admin:awa_django_deadletter_changelist"),
    "dead-letter detail": reverse("admin:awa_django_deadletter_change", args=[{doomed}]),
    "queue health": reverse("admin:awa_django_queue_changelist"),
    "queue descriptors": reverse("admin:awa_django_queuedescriptor_changelist"),
    "kind descriptors": reverse("admin:awa_django_kinddescriptor_changelist"),
    "runtimes": reverse("admin:awa_django_runtimeinstance_changelist"),
}}
answers = {{}}
for name, url in pages.items():
    response = client.get(url)
    body = response.content.decode()
    answers[name] = {{"url": url, "status": response.status_code, "body": body}}
Path({out!r}).write_text(json.dumps(answers))
"""


def last_json_line(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def write_project(project: Path, databases: str) -> None:
    for package, modules in {
        "mysite": {"settings": SETTINGS.format(databases=databases), "urls": URLS},
        "greetings": {"jobs": JOBS},
    }.items():
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text("")
        for module, source in modules.items():
            (project / package / f"{module}.py").write_text(source)


def test_the_installed_wheel_runs_a_project_its_worker_and_its_admin(dists, tmp_path):
    assert not tmp_path.is_relative_to(ROOT), "the virtualenv and project are outside"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The Django this suite runs on, so each CI leg installs its own version.
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            str(dists.wheel),
            f"Django=={django.__version__}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    project = tmp_path / "project"
    with fresh_database("awa_installed") as database:
        write_project(project, database.databases_setting())
        env = project_env("mysite.settings", project)

        def django_admin(*args: str) -> subprocess.CompletedProcess[str]:
            return run_django(env, args, python=python, cwd=project)

        where = django_admin("shell", "-c", "import awa_django; print(awa_django.__file__)")
        assert where.returncode == 0, where.stderr
        installed = Path(where.stdout.strip().splitlines()[-1]).resolve()
        assert installed.is_relative_to(venv.resolve()), installed
        assert not installed.is_relative_to(ROOT), installed

        check = django_admin("check")
        assert check.returncode == 0, check.stdout + check.stderr
        assert "System check identified no issues" in check.stdout, check.stdout + check.stderr
        assert "awa." not in check.stdout + check.stderr

        migrate = django_admin("migrate", "--no-input")
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
        assert "Applying awa_django.0001" in migrate.stdout

        ids = last_json_line(django_admin("shell", "-c", ENQUEUE))

        worker = django_admin("awa_worker", "--burst")
        assert worker.returncode == 0, worker.stdout + worker.stderr

        states = last_json_line(django_admin("shell", "-c", STATES.format(ids=ids)))
        assert states == {"hello": "completed", "doomed": "dlq"}

        out = tmp_path / "admin_pages.json"
        pages = django_admin("shell", "-c", ADMIN_PAGES.format(out=str(out), **ids))
        assert pages.returncode == 0, pages.stdout + pages.stderr
        answers = json.loads(out.read_text())

    titles = {
        "app index": "Awa job queue administration",
        "jobs": "Jobs",
        "job detail": f"Job {ids['hello']}",
        "dead-letter queue": "Dead-letter queue",
        "dead-letter detail": f"Dead-letter job {ids['doomed']}",
        "queue health": "Queue health",
        "queue descriptors": "Queue descriptors",
        "kind descriptors": "Job kind descriptors",
        "runtimes": "Runtimes",
    }
    assert sorted(answers) == sorted(titles)
    for name, title in titles.items():
        answer = answers[name]
        assert answer["status"] == 200, (name, answer["url"], answer["status"], answer["body"])
        assert f"<title>{title} |" in answer["body"], (name, answer["url"], answer["body"])
    assert "completed" in answers["job detail"]["body"]
    assert "meant to land in the dead-letter queue" in answers["dead-letter detail"]["body"]
