"""Settings of the upgrade test's project: the same for the released and the current code."""

import json
import os

SECRET_KEY = "upgrade-test"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "awa_django", "upgrade_app"]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.postgresql", **json.loads(os.environ["UPGRADE_DB"])}
}
USE_TZ = True
AWA = {
    "QUEUES": {
        "default": {"concurrency": 4},
        "live": {"concurrency": 2},
        "dead": {"concurrency": 2, "dlq": True},
    },
    "POLL_INTERVAL_S": 0.2,
}
