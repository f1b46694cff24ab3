"""Template filters of the admin pages."""

from __future__ import annotations

from datetime import UTC, datetime

from django.test import override_settings

from awa_django.templatetags.awa_admin import pretty_json, when


@override_settings(TIME_ZONE="Europe/Paris", USE_TZ=True)
def test_when_shows_seconds_in_the_current_time_zone():
    assert when(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02 04:04:05 CET"
    assert when(None) == "—"


def test_pretty_json_is_indented_and_sorted():
    assert pretty_json({"b": 1, "a": [1]}) == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}'
