"""Settings of the example project, read from the environment with django-environ.

``DATABASE_URL`` names the PostgreSQL database (``make demo`` and ``make test`` start a
throwaway server and set it when it is unset).
"""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env(
    DEBUG=(bool, False),
    SECRET_KEY=(str, "example-only-not-secret"),
    AWA_RETRY_BACKOFF_BASE_S=(float, 1.0),
    # Signs callbacks between the shop and its (fake) payment provider; >= 32 characters.
    AWA_CALLBACK_SECRET=(str, "example-only-callback-secret-not-for-production"),
    # Where this site is reachable: callback URLs handed to the provider start with it.
    AWA_CALLBACK_BASE_URL=(str, "http://127.0.0.1:8000"),
    SHOP_PAYMENT_PROVIDER_URL=(str, "http://127.0.0.1:8000/shop/provider/charges/"),
)

DEBUG = env("DEBUG")
SECRET_KEY = env("SECRET_KEY")
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "awa_django",
    "example_project.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://awa@127.0.0.1:5432/awa")}
# A second server, when given (`make test` starts one): the tests of queues in another database
# declare such queues with AWA["QUEUES"][name]["database"] = "second" (docs/deployment.md).
if env.str("DATABASE_URL_2", default=""):
    DATABASES["second"] = env.db("DATABASE_URL_2")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"

AWA = {
    "QUEUES": {
        "default": {"concurrency": 8},
        "email": {"concurrency": 4},
        # The marketplace partner takes 5 calls a second from all our workers together and
        # needs an order's events in the order they happened (docs/scheduling.md).
        "partners": {
            "concurrency": 4,
            "rate_limit": (5, 2),
            "rate_limit_scope": "fleet",
            "sequential_lanes": True,
        },
    },
    "RETRY_BACKOFF_BASE_S": env("AWA_RETRY_BACKOFF_BASE_S"),
    "CALLBACK_SECRET": env("AWA_CALLBACK_SECRET"),
    "CALLBACK_BASE_URL": env("AWA_CALLBACK_BASE_URL"),
    # Extra handler modules, e.g. the test suite's (every app's jobs.py is found anyway).
    "JOB_MODULES": env.list("AWA_JOB_MODULES", default=[]),
}
# Any other AWA key, as JSON: the test suite uses it to give worker subprocesses short intervals.
AWA.update(env.json("AWA_OVERRIDES", default={}))

# The fake payment provider the shop's collect_payment job calls (example_project/shop/provider.py).
SHOP_PAYMENT_PROVIDER_URL = env("SHOP_PAYMENT_PROVIDER_URL")

# Django's own @task functions run on awa (django.tasks on Django 6, the backport on 5.2).
TASKS = {
    "default": {
        "BACKEND": "awa_django.tasks.AwaBackend",
        "QUEUES": ["default", "email"],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # The level and logger on every line, as awa_worker prints them without LOGGING: an INFO
    # outcome and an ERROR failure must not look alike.
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"awa_django": {"handlers": ["console"], "level": "INFO"}},
}
