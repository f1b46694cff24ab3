"""``TASKS`` naming ``AwaBackend`` without Django's Tasks framework installed fails ``check``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.checks.registry import registry
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from awa_django.checks import TASKS_FRAMEWORKS, check_tasks_framework

AWA_TASKS = {"default": {"BACKEND": "awa_django.tasks.AwaBackend"}}


@contextmanager
def without_tasks_framework() -> Iterator[None]:
    """Neither django.tasks nor the backport importable, as on Django 5.2 without the backport:
    a None entry in sys.modules makes ``import`` raise ImportError. The framework's own checks
    (Django 6 registers ``django.tasks.checks``) are taken out of the registry too, as they do
    not exist where the framework is missing. Entered inside the settings change, and left
    before it ends: the backport, once imported, reads TASKS when it changes."""
    saved = {module: sys.modules.get(module) for module in TASKS_FRAMEWORKS}
    framework_checks = {
        check
        for check in registry.registered_checks
        if check.__module__.startswith(tuple(TASKS_FRAMEWORKS))
    }
    sys.modules.update(dict.fromkeys(TASKS_FRAMEWORKS))
    registry.registered_checks -= framework_checks
    try:
        yield
    finally:
        registry.registered_checks |= framework_checks
        for module, value in saved.items():
            if value is None:
                del sys.modules[module]
            else:
                sys.modules[module] = value


def test_awa_backend_without_the_framework_is_e070():
    with override_settings(TASKS=AWA_TASKS), without_tasks_framework():
        (error,) = check_tasks_framework()
    assert error.id == "awa.E102"
    assert "django-tasks" in error.hint


def test_manage_py_check_fails_with_e070():
    with (
        override_settings(TASKS=AWA_TASKS),
        without_tasks_framework(),
        pytest.raises(SystemCheckError, match=r"awa\.E102"),
    ):
        call_command("check")


def test_another_backend_or_no_tasks_setting_passes():
    other = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    with override_settings(TASKS=other), without_tasks_framework():
        assert check_tasks_framework() == []
    with override_settings(TASKS=None), without_tasks_framework():
        assert check_tasks_framework() == []


def test_awa_backend_with_the_framework_installed_passes():
    with override_settings(TASKS=AWA_TASKS):
        assert check_tasks_framework() == []
