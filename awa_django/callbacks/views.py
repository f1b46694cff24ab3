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
from awa_django.exceptions import InvalidCallback, StaleCallback, UnknownCallback

# Allowed body keys of each action, and the one it requires (if any).
_FIELDS: Final[Mapping[str, tuple[frozenset[str], str | None]]] = {
    "complete": (frozenset({"payload"}), None),
    "fail": (frozenset({"error"}), "error"),
    "retry": (frozenset({"delay_s"}), None),
    "heartbeat": (frozenset({"timeout_s"}), "timeout_s"),
    "resume": (frozenset({"payload"}), None),
}


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _parse_body(action: str, raw: bytes) -> dict[str, Any]:
    """The body as a dict of this action's fields; ``InvalidCallback`` says what is wrong."""
    try:
        body = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidCallback(f"body is not JSON: {exc}") from None
    except RecursionError:
        # Nested deeper than the parser's recursion allows, and far deeper than a payload may
        # be stored (exact_json.MAX_DEPTH).
        raise InvalidCallback("body is nested too deeply") from None
    if not isinstance(body, dict):
        raise InvalidCallback("body must be a JSON object")
    allowed, required = _FIELDS[action]
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidCallback(
            f"unknown field(s) {unknown} for {action}; allowed: {sorted(allowed)}"
        )
    if required is not None and required not in body:
        raise InvalidCallback(f"{action} needs the field {required!r}")
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
        answer = _perform(token, action, body)
    except InvalidCallback as exc:
        return _error(400, str(exc))
    except UnknownCallback as exc:
        return _error(404, str(exc))
    except StaleCallback as exc:
        return _error(409, str(exc))
    return JsonResponse({"ok": True, "action": action, **answer})
