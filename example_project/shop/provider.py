"""A fake payment provider, served by the example project itself.

``POST /shop/provider/charges/`` takes ``{"amount", "card", "reference", "token",
"complete_url", "fail_url"}``, answers 202 at once, and a moment later calls back the way a real
provider's webhook would: a signed ``POST`` to ``complete_url`` with the charge, or to
``fail_url`` when the card is one of ``DECLINED_CARDS``. It signs with ``awa.sign_callback``:
the secret (``AWA["CALLBACK_SECRET"]``) is what the shop shares with its provider.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Final

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

import awa_django as awa
from example_project.shop.jobs import DECLINED_CARDS

logger = logging.getLogger(__name__)

# How long the fake provider "processes" a charge before calling back.
PROCESSING_S: Final = 0.2
_FIELDS: Final = ("amount", "card", "reference", "token", "complete_url", "fail_url")


def call_back(url: str, token: str, action: str, body: dict[str, Any]) -> int:
    """POST a signed callback; returns the HTTP status the shop answered."""
    raw = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **awa.sign_callback(token, raw, action=action)}
    request = urllib.request.Request(url, data=raw, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _process(charge: dict[str, str], charge_id: str) -> None:
    time.sleep(PROCESSING_S)
    if charge["card"] in DECLINED_CARDS:
        status = call_back(
            charge["fail_url"], charge["token"], "fail", {"error": f"card declined ({charge_id})"}
        )
    else:
        payload = {"charge_id": charge_id, "amount": charge["amount"], "status": "succeeded"}
        status = call_back(
            charge["complete_url"], charge["token"], "complete", {"payload": payload}
        )
    logger.info("provider called back charge=%s status=%s", charge_id, status)


@csrf_exempt
@require_POST
def create_charge(request: HttpRequest) -> JsonResponse:
    """Accept a charge and call back later; 202 with the charge id."""
    try:
        charge = json.loads(request.body)
    except json.JSONDecodeError:
        return JsonResponse({"error": "body is not JSON"}, status=400)
    if not isinstance(charge, dict) or not all(isinstance(charge.get(f), str) for f in _FIELDS):
        return JsonResponse({"error": f"fields {list(_FIELDS)} must be strings"}, status=400)
    charge_id = f"ch_{uuid.uuid4().hex[:12]}"
    threading.Thread(target=_process, args=(charge, charge_id), daemon=True).start()
    return JsonResponse({"charge_id": charge_id, "status": "pending"}, status=202)
