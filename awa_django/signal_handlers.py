"""Receivers awa_django attaches to Django's own signals."""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from awa_django import conf


@receiver(setting_changed)
def reset_settings_cache(*, setting: str, **_: Any) -> None:
    """Rebuild ``conf.get_settings()`` after ``override_settings`` touches AWA or DATABASES."""
    if setting in ("AWA", "DATABASES"):
        conf.clear_cache()
