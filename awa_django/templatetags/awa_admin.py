"""Template filters of the awa admin pages."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON for a <pre> block (autoescaped by the template)."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)
