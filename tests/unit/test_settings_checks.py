"""Invalid AWA settings fail ``manage.py check`` with awa.E0xx ids."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from awa_django import conf
from awa_django.exceptions import ConfigError

BASE_QUEUES = {"default": {"concurrency": 2}}


def problem_ids(**awa_settings):
    with override_settings(AWA=awa_settings):
        return [p.id for p in conf.problems()]


@pytest.mark.parametrize(
    ("awa_settings", "expected"),
    [
        ({"QUEUES": BASE_QUEUES, "CONCURENCY": 3}, "awa.E002"),
        ({"QUEUES": BASE_QUEUES, "DATABASE_ALIAS": "nope"}, "awa.E003"),
        ({"QUEUES": {}}, "awa.E005"),
        ({"QUEUES": {"bad name!": {}}}, "awa.E005"),
        ({"QUEUES": {"default": {"concurrency": 0}}}, "awa.E006"),
        ({"QUEUES": {"default": {"concurency": 2}}}, "awa.E006"),
        ({"QUEUES": {"default": {"concurrency": "4"}}}, "awa.E006"),
        ({"QUEUES": BASE_QUEUES, "DEFAULT_QUEUE": "other"}, "awa.E007"),
        ({"QUEUES": BASE_QUEUES, "DEFAULT_PRIORITY": 9}, "awa.E008"),
        ({"QUEUES": BASE_QUEUES, "DEFAULT_MAX_ATTEMPTS": -1}, "awa.E009"),
        ({"QUEUES": BASE_QUEUES, "POLL_INTERVAL_S": 0}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "CLAIM_BATCH_SIZE": 1.5}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "WORKER_POOL_SIZE": 0}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "WORKER_POOL_SIZE": True}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "RETRY_JITTER": 2}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "JOB_MODULES": "tests.jobs"}, "awa.E011"),
        ({"QUEUES": BASE_QUEUES, "UNKNOWN_KIND_TIMEOUT_S": -1}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "UNKNOWN_KIND_TIMEOUT_S": "1h"}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "EXTERNAL_KINDS": "billing.*"}, "awa.E013"),
        ({"QUEUES": BASE_QUEUES, "EXTERNAL_KINDS": [""]}, "awa.E013"),
        ({"QUEUES": BASE_QUEUES, "EXTERNAL_KINDS": ["bill*ing"]}, "awa.E013"),
        ({"QUEUES": BASE_QUEUES, "EXTERNAL_KINDS": [7]}, "awa.E013"),
        ({"QUEUES": {"default": {"dlq": "yes"}}}, "awa.E020"),
        ({"QUEUES": {"default": {"owner": 7}}}, "awa.E021"),
        ({"QUEUES": BASE_QUEUES, "RUNTIME_SNAPSHOT_INTERVAL_S": 0}, "awa.E022"),
        ({"QUEUES": BASE_QUEUES, "RUNTIME_STALE_AFTER_S": 5}, "awa.E023"),
        ({"QUEUES": BASE_QUEUES, "JOB_LOG": "quiet"}, "awa.E070"),
        ({"QUEUES": BASE_QUEUES, "JOB_LOG": ["summary"]}, "awa.E070"),
        ({"QUEUES": BASE_QUEUES, "JOB_LOG_SUMMARY_INTERVAL_S": 0}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "JOB_LOG_FAILURES_PER_S": 0}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "JOB_LOG_FAILURES_PER_S": 2.5}, "awa.E010"),
        ({"QUEUES": BASE_QUEUES, "ADMIN_STATEMENT_TIMEOUT_MS": 0}, "awa.E080"),
        ({"QUEUES": BASE_QUEUES, "ADMIN_STATEMENT_TIMEOUT_MS": 2.5}, "awa.E080"),
        ({"QUEUES": BASE_QUEUES, "ADMIN_STATEMENT_TIMEOUT_MS": "10s"}, "awa.E080"),
        ({"QUEUES": BASE_QUEUES, "ADMIN_STATEMENT_TIMEOUT_MS": 2**31}, "awa.E080"),
    ],
)
def test_invalid_setting_is_reported_with_its_id(awa_settings, expected):
    assert expected in problem_ids(**awa_settings)


def test_non_dict_setting_is_e001():
    with override_settings(AWA=["default"]):
        assert [p.id for p in conf.problems()] == ["awa.E001"]


def test_valid_settings_have_no_problems():
    assert problem_ids(QUEUES=BASE_QUEUES, DEFAULT_PRIORITY=1, RETRY_JITTER=0) == []
    assert problem_ids(QUEUES=BASE_QUEUES, JOB_LOG="summary", JOB_LOG_FAILURES_PER_S=1) == []
    assert problem_ids(QUEUES=BASE_QUEUES, UNKNOWN_KIND_TIMEOUT_S=0) == []
    assert problem_ids(QUEUES=BASE_QUEUES, EXTERNAL_KINDS=["billing.*", "mail.send", "*"]) == []


def test_manage_py_check_fails_with_the_id():
    with (
        override_settings(AWA={"QUEUES": {"default": {"concurrency": -3}}}),
        pytest.raises(SystemCheckError, match=r"awa\.E006"),
    ):
        call_command("check")


def test_get_settings_refuses_invalid_settings_and_resets_on_change():
    with (
        override_settings(AWA={"QUEUES": BASE_QUEUES, "DEFAULT_PRIORITY": 0}),
        pytest.raises(ConfigError, match=r"awa\.E008"),
    ):
        conf.get_settings()
    with override_settings(AWA={"QUEUES": {"default": {"concurrency": 7}}}):
        assert conf.get_settings().QUEUES["default"].concurrency == 7


@pytest.mark.parametrize(
    ("awa_settings", "check", "message"),
    [
        (
            {"HEARTBEAT_INTERVAL_S": 2, "HEARTBEAT_STALENESS_S": 5},
            "awa.E012",
            "AWA['HEARTBEAT_STALENESS_S'] (5) must be at least 3 x HEARTBEAT_INTERVAL_S (2), "
            "or live jobs get rescued between heartbeats.",
        ),
        (
            {"RUNTIME_SNAPSHOT_INTERVAL_S": 10, "RUNTIME_STALE_AFTER_S": 15},
            "awa.E023",
            "AWA['RUNTIME_STALE_AFTER_S'] (15) must be at least 2 x "
            "RUNTIME_SNAPSHOT_INTERVAL_S (10), or live workers look stale between snapshots.",
        ),
    ],
)
def test_a_setting_too_small_for_the_one_it_follows_says_by_how_much(awa_settings, check, message):
    with override_settings(AWA={"QUEUES": BASE_QUEUES, **awa_settings}):
        assert [(p.id, p.message) for p in conf.problems()] == [(check, message)]
