"""The HTTP callback endpoint: ``POST <prefix>/callbacks/<token>/<action>`` with a JSON body.

Actions and bodies (unknown keys are refused):

- ``complete`` ``{"payload": <json>}`` (optional): the job completes, keeping the payload.
- ``fail`` ``{"error": "<message>"}``: the attempt fails; the job retries or fails.
- ``retry`` ``{"delay_s": <seconds>}`` (optional, default 0): the job runs again after it.
- ``heartbeat`` ``{"timeout_s": <seconds>}``: the callback times out that long from now.
- ``resume`` ``{"payload": <json>}`` (optional): a sequential wait carries on with it.

Everything is checked before anything is written, and a write is one transaction: a refused
request (401 signature, 400 body, 413 size, 404 unknown token, 409 stale token) changes nothing.
This view alone is CSRF-exempt: it is authenticated by its signature, not a session.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from awa_django.callbacks import external
from awa_django.callbacks.signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature_problem
from awa_django.conf import get_settings
from awa_django.declarations.exact_json import MAX_DEPTH
from awa_django.exceptions import InvalidCallback, StaleCallback, UnknownCallback

# The one body field of each action, and whether it is required.
_FIELDS: Final[Mapping[str, tuple[str, bool]]] = {
    "complete": ("payload", False),
    "fail": ("error", True),
    "retry": ("delay_s", False),
    "heartbeat": ("timeout_s", True),
    "resume": ("payload", False),
}


def _error(status: int, message: str, *, field: str | None = None) -> JsonResponse:
    body = {"error": message} if field is None else {"error": message, "field": field}
    return JsonResponse(body, status=status)


class _BadBody(Exception):
    """Why a body is refused before any callback is looked up, and the field at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not a JSON value")


def _parse_body(action: str, raw: bytes) -> dict[str, Any]:
    """The body as a dict of this action's fields; ``_BadBody`` says what is wrong."""
    try:
        # NaN and Infinity are Python's extensions, not JSON.
        body = json.loads(raw, parse_constant=_not_json) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        # ValueError covers JSONDecodeError and integers past Python's 4300-digit limit.
        raise _BadBody(f"body is not JSON: {exc}") from None
    except RecursionError:
        # The decoder recurses once per level; the payload's own limit is far lower.
        raise _BadBody(
            f"body is nested too deeply: a payload may nest at most {MAX_DEPTH} levels"
        ) from None
    if not isinstance(body, dict):
        raise _BadBody("body must be a JSON object")
    field, required = _FIELDS[action]
    unknown = sorted(set(body) - {field})
    if unknown:
        raise _BadBody(
            f"unknown field(s) {unknown} for {action}; allowed: [{field!r}]", field=unknown[0]
        )
    if required and field not in body:
        raise _BadBody(f"{action} needs the field {field!r}", field=field)
    return body


def _resume(token: str, payload: Any) -> dict[str, Any]:
    external.resume_external(token, payload)
    return {}


def _perform(token: str, action: str, body: dict[str, Any]) -> dict[str, Any]:
    actions: dict[str, Callable[[], dict[str, Any]]] = {
        "complete": lambda: {"outcome": external.complete_external(token, body.get("payload"))},
        "fail": lambda: {"outcome": external.fail_external(token, body["error"])},
        "retry": lambda: {"outcome": external.retry_external(token, body.get("delay_s", 0.0))},
        "heartbeat": lambda: {
            "timeout_at": external.heartbeat_callback(token, body["timeout_s"]).isoformat()
        },
        "resume": lambda: _resume(token, body.get("payload")),
    }
    return actions[action]()


@csrf_exempt
@require_POST
def callback(request: HttpRequest, token: str, action: str) -> JsonResponse:
    """Resolve the callback ``token`` as ``action`` (see the module docstring)."""
    if action not in _FIELDS:
        return _error(404, f"unknown action {action!r}; one of {sorted(_FIELDS)}")
    conf = get_settings()
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        return _error(400, "Content-Length is not a number")
    if declared > conf.CALLBACK_MAX_BODY_BYTES:
        return _error(413, f"body over {conf.CALLBACK_MAX_BODY_BYTES} bytes")
    raw = request.body
    if len(raw) > conf.CALLBACK_MAX_BODY_BYTES:
        return _error(413, f"body over {conf.CALLBACK_MAX_BODY_BYTES} bytes")
    if conf.CALLBACK_SECRET:
        problem = signature_problem(
            secret=conf.CALLBACK_SECRET,
            timestamp=request.headers.get(TIMESTAMP_HEADER),
            signature=request.headers.get(SIGNATURE_HEADER),
            token=token,
            action=action,
            body=raw,
            max_age_s=conf.CALLBACK_MAX_AGE_S,
            now=time.time(),
        )
        if problem is not None:
            return _error(401, problem)
    elif not conf.CALLBACK_ALLOW_UNSIGNED:
        return _error(503, "callbacks are disabled: AWA['CALLBACK_SECRET'] is not set")
    try:
        body = _parse_body(action, raw)
    except _BadBody as exc:
        return _error(400, str(exc), field=exc.field)
    field = _FIELDS[action][0]
    try:
        answer = _perform(token, action, body)
    except InvalidCallback as exc:
        # The one argument an action takes comes from its one field.
        return _error(400, str(exc), field=field)
    except UnknownCallback as exc:
        return _error(404, str(exc))
    except StaleCallback as exc:
        return _error(409, str(exc))
    return JsonResponse({"ok": True, "action": action, **answer})
