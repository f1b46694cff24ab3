"""Scheduling settings: invalid values fail ``manage.py check`` with awa.E040-E046, valid ones
reach the worker configuration."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from awa_django import conf
from awa_django.worker.process import config_from_settings
from awa_django.worker.rate_limit import RateLimit
from awa_django.worker.weighted import QueueShare


def problem_ids(**awa_settings):
    with override_settings(AWA=awa_settings):
        return [p.id for p in conf.problems()]


@pytest.mark.parametrize(
    ("queue_options", "expected"),
    [
        ({"aging_interval_s": -1}, "awa.E040"),
        ({"aging_interval_s": "60"}, "awa.E040"),
        ({"rate_limit": 20}, "awa.E041"),
        ({"rate_limit": (0, 5)}, "awa.E041"),
        ({"rate_limit": (20, 0)}, "awa.E041"),
        ({"rate_limit": (20, 1.5)}, "awa.E041"),
        ({"rate_limit": (20, 5), "rate_limit_scope": "cluster"}, "awa.E042"),
        ({"min_concurrency": -1}, "awa.E043"),
        ({"weight": 0}, "awa.E043"),
        ({"sequential_lanes": "yes"}, "awa.E046"),
    ],
)
def test_invalid_queue_option_is_reported_with_its_id(queue_options, expected):
    assert problem_ids(QUEUES={"default": queue_options}) == [expected]


def test_worker_concurrency_must_be_positive_and_hold_the_minimums():
    assert problem_ids(QUEUES={"default": {}}, WORKER_CONCURRENCY=0) == ["awa.E044"]
    assert problem_ids(
        QUEUES={"default": {"min_concurrency": 4}, "email": {"min_concurrency": 4}},
        WORKER_CONCURRENCY=6,
    ) == ["awa.E045"]


def test_invalid_scheduling_settings_fail_manage_py_check():
    with (
        override_settings(AWA={"QUEUES": {"default": {"rate_limit": "fast"}}}),
        pytest.raises(SystemCheckError, match=r"awa\.E041.*rate_limit"),
    ):
        call_command("check")


def test_valid_scheduling_settings_reach_the_worker_config():
    settings = {
        "WORKER_CONCURRENCY": 8,
        "QUEUES": {
            "default": {"min_concurrency": 2, "weight": 3, "aging_interval_s": 0},
            "email": {
                "rate_limit": [5, 10],
                "rate_limit_scope": "fleet",
                "sequential_lanes": True,
            },
        },
    }
    assert problem_ids(**settings) == []
    with override_settings(AWA=settings):
        config = config_from_settings(conf.get_settings())
    assert config.worker_concurrency == 8
    assert config.aging_s == {"default": 0, "email": 60.0}
    assert config.rate_limits == {"email": RateLimit(rate=5.0, burst=10, fleet=True)}
    assert config.shares == {"default": QueueShare(2, 3), "email": QueueShare(0, 1)}
    assert config.sequential == frozenset({"email"})


def test_options_of_the_other_concurrency_mode_are_warned_about():
    with override_settings(AWA={"QUEUES": {"default": {"min_concurrency": 2}}}):
        assert [p.id for p in conf.scheduling_warnings()] == ["awa.W040"]
    # "email" too: the example settings route a django.tasks queue there, checked on Django 6.
    weighted = {"WORKER_CONCURRENCY": 4, "QUEUES": {"default": {"concurrency": 2}, "email": {}}}
    with override_settings(AWA=weighted):
        assert [p.id for p in conf.scheduling_warnings()] == ["awa.W041"]
        call_command("check")  # warnings do not fail the check
    with override_settings(AWA={"QUEUES": {"default": {"concurrency": 2}}}):
        assert conf.scheduling_warnings() == []
