"""Callback settings: invalid values fail ``manage.py check`` (awa.E050-E054); a mounted
endpoint without a secret gets a warning (awa.W050, or awa.W051 when unsigned is allowed)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from awa_django import conf
from awa_django.checks import check_callback_endpoint

# "email" too: the example settings route a django.tasks queue there, checked on Django 6.
QUEUES = {"default": {"concurrency": 2}, "email": {}}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"CALLBACK_SECRET": "short"}, "awa.E050"),
        ({"CALLBACK_SECRET": b"x" * 40}, "awa.E050"),
        ({"CALLBACK_ALLOW_UNSIGNED": "yes"}, "awa.E051"),
        ({"CALLBACK_MAX_AGE_S": 0}, "awa.E052"),
        ({"CALLBACK_MAX_BODY_BYTES": 1.5}, "awa.E053"),
        ({"CALLBACK_BASE_URL": "example.com"}, "awa.E054"),
        ({"CALLBACK_BASE_URL": "https://example.com/a?b"}, "awa.E054"),
    ],
)
def test_invalid_callback_setting_fails_check(extra, expected):
    with override_settings(AWA={"QUEUES": QUEUES, **extra}):
        assert [p.id for p in conf.problems()] == [expected]
        with pytest.raises(SystemCheckError, match=expected.replace(".", r"\.")):
            call_command("check")


def test_valid_callback_settings():
    good = {
        "CALLBACK_SECRET": "k" * 32,
        "CALLBACK_ALLOW_UNSIGNED": False,
        "CALLBACK_MAX_AGE_S": 60,
        "CALLBACK_MAX_BODY_BYTES": 1024,
        "CALLBACK_BASE_URL": "https://shop.example.com/app",
    }
    with override_settings(AWA={"QUEUES": QUEUES, **good}):
        assert conf.problems() == []
        assert check_callback_endpoint() == []


def test_mounted_endpoint_without_secret_warns():
    with override_settings(AWA={"QUEUES": QUEUES}):
        assert [m.id for m in check_callback_endpoint()] == ["awa.W050"]
        output = StringIO()
        call_command("check", stderr=output, stdout=output)
        assert "awa.W050" in output.getvalue()
    with override_settings(AWA={"QUEUES": QUEUES, "CALLBACK_ALLOW_UNSIGNED": True}):
        assert [m.id for m in check_callback_endpoint()] == ["awa.W051"]


def test_no_warning_when_the_endpoint_is_not_mounted():
    with override_settings(AWA={"QUEUES": QUEUES}, ROOT_URLCONF="example_project.shop.urls"):
        assert check_callback_endpoint() == []
