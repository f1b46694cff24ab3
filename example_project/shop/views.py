"""JSON views that place orders: the job is enqueued in the same transaction as the order.

``POST /shop/orders/`` commits both, so a worker sends the receipt. ``POST /shop/orders/rollback/``
enqueues too, then fails inside the transaction: the order and its job vanish together, and no
worker ever sees the job. That atomicity is the point of a Postgres-native queue.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from example_project.shop.jobs import send_receipt
from example_project.shop.models import Order

# Order.amount is DecimalField(max_digits=10, decimal_places=2).
MAX_AMOUNT = Decimal("100000000")
CENT = Decimal("0.01")


class BadOrder(ValueError):
    """The request body does not describe an order; the message says why."""


class OrderRejected(Exception):
    """A business check failed after the order was written (and its job enqueued)."""


def _parse_order(request: HttpRequest) -> tuple[str, Decimal]:
    """The customer e-mail and amount from a JSON body ``{"email": ..., "amount": "12.50"}``."""
    try:
        body: Any = json.loads(request.body or b"{}")
    except json.JSONDecodeError as exc:
        raise BadOrder(f"body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadOrder("body must be a JSON object")
    email = body.get("email")
    try:
        validate_email(email)
    except ValidationError:
        raise BadOrder(f"email {email!r} is not a valid e-mail address") from None
    try:
        # Parsed from its string form so 0.1 stays 0.1 (floats would not).
        amount = Decimal(str(body.get("amount")))
    except InvalidOperation:
        raise BadOrder(f"amount {body.get('amount')!r} is not a number") from None
    # Checked in this order so quantize() only ever sees a finite number that fits the column.
    if not amount.is_finite() or not 0 < amount < MAX_AMOUNT or amount != amount.quantize(CENT):
        raise BadOrder(
            f"amount {body.get('amount')!r} must be positive, below {MAX_AMOUNT}, "
            "with at most 2 decimals"
        )
    return str(email), amount


def _place_order(email: str, amount: Decimal) -> tuple[Order, int]:
    """Write the order and enqueue its receipt; call inside ``transaction.atomic()``."""
    order = Order.objects.create(customer_email=email, amount=amount)
    # A plain INSERT on the same connection: the job commits or rolls back with the order,
    # so a worker can never e-mail a receipt for an order that does not exist.
    job_id = send_receipt.enqueue(order_id=order.pk)
    return order, job_id


# These endpoints read no cookies and take JSON bodies, so CSRF protection (which guards
# cookie-authenticated form posts) does not apply; a real shop would authenticate them.
@csrf_exempt
@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    """Place an order and enqueue its receipt in one transaction; 201 with both ids."""
    try:
        email, amount = _parse_order(request)
    except BadOrder as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    with transaction.atomic():
        order, job_id = _place_order(email, amount)
    return JsonResponse({"order_id": order.pk, "job_id": job_id}, status=201)


@csrf_exempt
@require_POST
def create_order_then_fail(request: HttpRequest) -> JsonResponse:
    """Place an order and enqueue its receipt, then fail before commit; 409 with the lost ids.

    The ids are returned only so a caller can check they never existed: ``awa.get_job`` finds
    no such job and no worker ever runs it.
    """
    try:
        email, amount = _parse_order(request)
    except BadOrder as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    order_id: int | None = None
    job_id: int | None = None
    try:
        with transaction.atomic():
            order, job_id = _place_order(email, amount)
            order_id = order.pk
            # Stands in for any check that fails after the writes, e.g. a fraud screen.
            raise OrderRejected(f"order #{order_id} rejected by the fraud screen")
    except OrderRejected as exc:
        return JsonResponse(
            {"error": str(exc), "rolled_back_order_id": order_id, "rolled_back_job_id": job_id},
            status=409,
        )
