"""The shop's background jobs: one per outcome a handler can produce.

The worker imports this module (every installed app's ``jobs.py`` is discovered), so each
``@awa.job`` below is registered under the kind ``"shop.<function name>"``.

- ``send_receipt`` (sync, queue "email"): completes; its effect is an e-mail and a timestamp.
- ``notify_warehouse`` (async): completes on the worker's event loop, with the async ORM.
- ``sync_inventory``: raises twice, is retried with exponential backoff, then completes.
- ``call_partner_webhook``: always raises; failed after its 3 attempts, every error kept.
- ``check_payment``: ``RetryAfter``, retry at the provider's pace (counts an attempt).
- ``wait_for_stock``: ``Snooze``, check again later (gives the attempt back).
- ``fulfil_order``: ``Cancel`` when the customer cancelled the order meanwhile.
- ``charge_card``: a ``TerminalError`` subclass; no point retrying a declined card.
- ``cancel_stale_orders``: periodic (``@awa.periodic``), every night at 03:00 UTC.
- ``send_payment_reminder``: unique (``awa.Unique``), at most one queued reminder per order.
- ``push_order_event`` (queue "partners"): rate-limited fleet-wide; an order's events share an
  ordering key, so they reach the partner one after another, in the order they happened.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

import awa_django as awa
from example_project.shop.models import Order, SentEmail

# Test card numbers the fake payment provider always declines.
DECLINED_CARDS = frozenset({"4000000000000002"})


class PaymentDeclined(awa.TerminalError):
    """The card was declined: retrying cannot help, so the job fails at once."""


class OrderMissing(awa.TerminalError):
    """The order a job was enqueued for no longer exists."""


@awa.job(queue="email", max_attempts=5)
def send_receipt(ctx: awa.JobContext, order_id: int) -> None:
    """E-mail the customer a receipt and stamp the order."""
    # A job can run more than once (a crashed worker's attempt is rescued and run again), so
    # the order row is locked and checked: the receipt goes out at most once per order.
    with transaction.atomic():
        order = Order.objects.select_for_update().filter(pk=order_id).first()
        if order is None:
            raise OrderMissing(f"order #{order_id} does not exist")
        if order.receipt_sent_at is not None:
            return
        SentEmail.objects.create(
            to=order.customer_email,
            subject=f"Receipt for order #{order.pk}: {order.amount}",
            order_id=order.pk,
            job_id=ctx.job_id,
        )
        order.receipt_sent_at = timezone.now()
        order.save(update_fields=["receipt_sent_at"])


@awa.job
async def notify_warehouse(ctx: awa.JobContext, order_id: int) -> None:
    """Tell the warehouse to pack the order. Async: runs on the worker's event loop."""
    updated = await Order.objects.filter(pk=order_id).aupdate(warehouse_notified_at=timezone.now())
    if not updated:
        raise OrderMissing(f"order #{order_id} does not exist")


@awa.job(max_attempts=5)
def sync_inventory(ctx: awa.JobContext, sku: str, failures_before_success: int = 2) -> None:
    """Push stock levels to a flaky supplier API that times out a few times first."""
    # The simulated outage is keyed on the attempt number, so the story is deterministic:
    # attempts 1..failures_before_success raise, the next one succeeds.
    if ctx.attempt <= failures_before_success:
        raise ConnectionError(f"supplier API timed out for {sku} (attempt {ctx.attempt})")


@awa.job(max_attempts=3)
def call_partner_webhook(ctx: awa.JobContext, url: str) -> None:
    """POST to a partner whose endpoint is down for good: exhausts its 3 attempts."""
    raise ConnectionError(f"{url} refused the connection")


@awa.job(max_attempts=5)
def check_payment(
    ctx: awa.JobContext, order_id: int, pending_polls: int = 1, retry_in_s: float = 0.3
) -> None:
    """Ask the payment provider whether the order is paid; it says "pending" at first."""
    if ctx.attempt <= pending_polls:
        # The provider tells us when to ask again, so use its delay, not our backoff.
        raise awa.RetryAfter(retry_in_s, f"payment of order #{order_id} still pending")
    if not Order.objects.filter(pk=order_id).update(status=Order.Status.PAID):
        raise OrderMissing(f"order #{order_id} does not exist")


@awa.job(max_attempts=1)
def wait_for_stock(
    ctx: awa.JobContext, sku: str, restocked_after_checks: int = 1, check_every_s: float = 0.3
) -> None:
    """Reserve stock once it arrives; until then, check again later without failing."""
    # run_lease grows on every pickup, snoozed ones included, while a snooze gives its attempt
    # back: so this job completes on its second pickup with attempt still 1 (of max 1).
    if ctx.run_lease <= restocked_after_checks:
        raise awa.Snooze(check_every_s)


@awa.job
def fulfil_order(ctx: awa.JobContext, order_id: int) -> None:
    """Ship the order, unless the customer cancelled it meanwhile."""
    order = Order.objects.filter(pk=order_id).first()
    if order is None:
        raise OrderMissing(f"order #{order_id} does not exist")
    if order.status == Order.Status.CANCELLED:
        # Nothing went wrong: there is simply nothing to do. Cancelled, not failed.
        raise awa.Cancel(f"order #{order_id} was cancelled by the customer")
    SentEmail.objects.create(
        to=order.customer_email,
        subject=f"Order #{order.pk} has shipped",
        order_id=order.pk,
        job_id=ctx.job_id,
    )


@awa.job
def charge_card(ctx: awa.JobContext, order_id: int, card_number: str) -> None:
    """Charge the order's card; a declined card is a terminal failure."""
    if card_number in DECLINED_CARDS:
        raise PaymentDeclined(f"card ending {card_number[-4:]} was declined")
    if not Order.objects.filter(pk=order_id).update(status=Order.Status.PAID):
        raise OrderMissing(f"order #{order_id} does not exist")


@awa.periodic("0 3 * * *", args={"older_than_days": 7})
@awa.job
def cancel_stale_orders(ctx: awa.JobContext, older_than_days: int) -> None:
    """Every night, cancel the orders that stayed unpaid for ``older_than_days``.

    The schedule is stored in the database when a worker starts and fired by the maintenance
    leader, once per night however many workers run (``manage.py awa_cron list`` shows it).
    """
    cutoff = timezone.now() - timedelta(days=older_than_days)
    Order.objects.filter(status=Order.Status.PLACED, created_at__lt=cutoff).update(
        status=Order.Status.CANCELLED
    )


@awa.job(queue="email", unique=awa.Unique(states=awa.Unique.ACTIVE_STATES))
def send_payment_reminder(ctx: awa.JobContext, order_id: int) -> None:
    """Remind the customer to pay. The shop may ask for a reminder on every page view: while one
    for the order is waiting or running, asking again returns that job instead of a second one.
    """
    order = Order.objects.filter(pk=order_id, status=Order.Status.PLACED).first()
    if order is None:
        return  # paid or cancelled meanwhile: nothing to remind
    SentEmail.objects.create(
        to=order.customer_email,
        subject=f"Order #{order.pk} is waiting for payment",
        order_id=order.pk,
        job_id=ctx.job_id,
    )


@awa.job(queue="partners")
def push_order_event(ctx: awa.JobContext, order_id: int, event: str) -> None:
    """Tell the marketplace partner what happened to an order.

    Enqueue with ``ordering_key=f"order-{order_id}"``: the key pins an order's events to one
    enqueue shard of the sequential "partners" queue, so they run strictly in enqueue order
    while other orders' events run in parallel, all within the partner's rate limit.
    """
    if not Order.objects.filter(pk=order_id).exists():
        raise OrderMissing(f"order #{order_id} does not exist")
