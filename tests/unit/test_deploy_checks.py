"""``manage.py check --deploy``: unsigned callbacks and eager mode are errors with DEBUG off
(awa.E055, awa.E062); a guessable callback secret, a plain-HTTP callback base URL and a queue
database whose connections close after every request are warnings (awa.W052, awa.W053,
awa.W054). None of them runs without --deploy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from awa_django.checks.deploy import check_deployment, secret_bits
from tests.conftest import REPO_ROOT

# The checks read settings.DATABASES, which the tests give CONN_MAX_AGE and pool options.
pytestmark = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")

QUEUES = {"default": {}, "email": {}}
# secrets.token_hex(16): the shortest secret the docs suggest is not weak.
HEX_16 = "9f86d081884c7d659a2feaa0c55ad015"


@pytest.mark.parametrize(
    ("debug", "extra", "expected"),
    [
        (False, {"CALLBACK_ALLOW_UNSIGNED": True}, ["awa.E055"]),
        (True, {"CALLBACK_ALLOW_UNSIGNED": True}, []),
        # With a secret the switch is ignored: every request is still signed.
        (False, {"CALLBACK_ALLOW_UNSIGNED": True, "CALLBACK_SECRET": HEX_16}, []),
        (False, {"EAGER": True}, ["awa.E062"]),
        (True, {"EAGER": True}, []),
        (False, {"CALLBACK_SECRET": "a" * 32}, ["awa.W052"]),
        (True, {"CALLBACK_SECRET": "abcd" * 8}, ["awa.W052"]),
        # 32 digits: about 106 bits.
        (False, {"CALLBACK_SECRET": "0123456789" * 3 + "01"}, ["awa.W052"]),
        (False, {"CALLBACK_SECRET": HEX_16}, []),
        (False, {"CALLBACK_SECRET": "example-only-callback-secret-not-for-production"}, []),
        (False, {"CALLBACK_BASE_URL": "http://shop.example.com"}, ["awa.W053"]),
        (True, {"CALLBACK_BASE_URL": "http://10.0.0.7:8000/app"}, ["awa.W053"]),
        (False, {"CALLBACK_BASE_URL": "https://shop.example.com"}, []),
        # Loopback never leaves the machine: the demo's own provider calls back there.
        (False, {"CALLBACK_BASE_URL": "http://127.0.0.1:8000"}, []),
        (False, {"CALLBACK_BASE_URL": "http://localhost:8000"}, []),
        (False, {"CALLBACK_BASE_URL": "http://[::1]:8000"}, []),
        (
            False,
            {"EAGER": True, "CALLBACK_ALLOW_UNSIGNED": True, "CALLBACK_BASE_URL": "http://a.b"},
            ["awa.E055", "awa.E062", "awa.W053"],
        ),
    ],
)
def test_deploy_checks(debug, extra, expected):
    with (
        override_settings(DATABASES=databases(CONN_MAX_AGE=60)),
        override_settings(DEBUG=debug, AWA={"QUEUES": QUEUES, **extra}),
    ):
        assert [message.id for message in check_deployment()] == expected


def databases(**options: Any) -> dict[str, dict[str, Any]]:
    """settings.DATABASES with ``options`` on every alias."""
    return {alias: {**database, **options} for alias, database in settings.DATABASES.items()}


@pytest.mark.parametrize(
    ("options", "queues", "closing"),
    [
        # Django's default: a new server session per request.
        ({"CONN_MAX_AGE": 0}, QUEUES, ["default"]),
        ({}, QUEUES, ["default"]),
        ({"CONN_MAX_AGE": 60}, QUEUES, []),
        ({"CONN_MAX_AGE": None}, QUEUES, []),
        # Django 5.1+'s psycopg pool keeps sessions whatever CONN_MAX_AGE says.
        ({"CONN_MAX_AGE": 0, "OPTIONS": {"pool": True}}, QUEUES, []),
        ({"CONN_MAX_AGE": 0, "OPTIONS": {"pool": {"min_size": 2}}}, QUEUES, []),
        # Only the databases holding queues are named.
        (
            {"CONN_MAX_AGE": 0},
            {"default": {}, "video": {"database": "second"}},
            ["default", "second"],
        ),
    ],
)
def test_connections_closed_after_every_request_are_a_deploy_warning(options, queues, closing):
    aliases = {"default": {}, "second": {}, "reports": {}}
    with override_settings(
        DATABASES={alias: {**settings.DATABASES["default"], **options} for alias in aliases},
        AWA={"QUEUES": queues},
    ):
        found = [message for message in check_deployment() if message.id == "awa.W054"]
    if not closing:
        assert found == []
        return
    [warning] = found
    assert warning.msg.startswith(
        ", ".join(f"DATABASES[{alias!r}]" for alias in closing) + ": CONN_MAX_AGE = 0"
    )
    assert "'reports'" not in warning.msg
    assert "CONN_MAX_AGE = 60" in warning.hint and "SILENCED_SYSTEM_CHECKS" in warning.hint


def test_the_secret_estimate_follows_length_and_alphabet():
    assert secret_bits(HEX_16) == 128
    assert secret_bits("7" * 30 + "12") == pytest.approx(32 * 3.3219, rel=1e-3)
    assert secret_bits("aB3!" * 8) == pytest.approx(32 * 6.5699, rel=1e-3)  # 10+26+26+33


def test_deploy_errors_fail_check_deploy_only():
    with override_settings(
        DEBUG=False, AWA={"QUEUES": QUEUES, "EAGER": True}, DATABASES=databases(CONN_MAX_AGE=60)
    ):
        call_command("check")
        with pytest.raises(SystemCheckError, match=r"awa\.E062"):
            call_command("check", "--deploy")


def test_check_deploy_exits_non_zero_as_a_process():
    env = {
        **os.environ,
        "DATABASE_URL": os.environ.get("DATABASE_URL", "postgres://awa@127.0.0.1:5432/awa"),
        "DEBUG": "false",
        "AWA_OVERRIDES": json.dumps({"EAGER": True, "CALLBACK_SECRET": "x" * 40}),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "(awa.E062)" in output and "(awa.W052)" in output
    # The example project's base URL is loopback, and unsigned callbacks are off.
    assert "awa.W053" not in output and "awa.E055" not in output
    # Its database keeps Django's default CONN_MAX_AGE of 0.
    assert "DATABASES['default']: CONN_MAX_AGE = 0 and no pool" in output and "(awa.W054)" in output
