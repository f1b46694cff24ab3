"""Each shop job ends in the outcome it is there to show, with its effect on the order."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

import awa_django as awa
from awa_django.declarations.cron import declared_schedules
from example_project.shop import jobs
from example_project.shop.models import Order, SentEmail
from tests.conftest import BackgroundWorker, run_burst

pytestmark = pytest.mark.usefixtures("awa_db")


def make_order(**fields) -> Order:
    return Order.objects.create(
        **{"customer_email": "ann@example.com", "amount": Decimal("10"), **fields}
    )


def test_kinds_default_to_app_label_and_function_name():
    assert jobs.send_receipt.kind == "shop.send_receipt"
    assert jobs.notify_warehouse.kind == "shop.notify_warehouse"
    assert jobs.notify_warehouse.is_async


def test_async_job_updates_the_order():
    order = make_order()
    job_id = jobs.notify_warehouse.enqueue(order_id=order.pk)

    run_burst()

    assert awa.get_job(job_id).state == "completed"
    order.refresh_from_db()
    assert order.warehouse_notified_at is not None


def test_flaky_job_is_retried_until_it_succeeds():
    job_id = jobs.sync_inventory.enqueue(sku="MUG-01")

    run_burst(burst_wait_s=5)

    job = awa.get_job(job_id)
    assert (job.state, job.attempt) == ("completed", 3)
    assert [e["attempt"] for e in job.errors] == [1, 2]


def test_always_failing_job_fails_after_max_attempts_keeping_every_error():
    job_id = jobs.call_partner_webhook.enqueue(url="https://partner.invalid/hook")

    run_burst(burst_wait_s=5)

    job = awa.get_job(job_id)
    assert (job.state, job.attempt, job.max_attempts) == ("failed", 3, 3)
    assert [e["attempt"] for e in job.errors] == [1, 2, 3]
    assert all("refused the connection" in e["message"] for e in job.errors)


def test_retry_after_counts_an_attempt_then_marks_the_order_paid():
    order = make_order()
    job_id = jobs.check_payment.enqueue(order_id=order.pk, retry_in_s=0.05)

    run_burst(burst_wait_s=5)

    job = awa.get_job(job_id)
    assert (job.state, job.attempt, len(job.errors)) == ("completed", 2, 1)
    order.refresh_from_db()
    assert order.status == Order.Status.PAID


def test_snooze_gives_the_attempt_back():
    # max_attempts=1: if the snooze used up an attempt, the second pickup could not happen.
    job_id = jobs.wait_for_stock.enqueue(sku="MUG-01", check_every_s=0.05)

    run_burst(burst_wait_s=5)

    job = awa.get_job(job_id)
    assert (job.state, job.attempt, job.run_lease, job.errors) == ("completed", 1, 2, [])


def test_cancelled_order_cancels_its_fulfilment():
    order = make_order(status=Order.Status.CANCELLED)
    job_id = jobs.fulfil_order.enqueue(order_id=order.pk)

    run_burst()

    job = awa.get_job(job_id)
    assert job.state == "cancelled"
    assert "cancelled by the customer" in job.errors[-1]["reason"]
    assert not SentEmail.objects.exists()


def test_declined_card_fails_at_once():
    order = make_order()
    job_id = jobs.charge_card.enqueue(order_id=order.pk, card_number="4000000000000002")

    run_burst(burst_wait_s=5)

    job = awa.get_job(job_id)
    assert (job.state, job.attempt) == ("failed", 1)
    assert job.errors[-1]["type"].endswith("PaymentDeclined")
    order.refresh_from_db()
    assert order.status == Order.Status.PLACED


def test_send_receipt_mails_once_even_if_run_twice():
    order = make_order()
    first = jobs.send_receipt.enqueue(order_id=order.pk)
    second = jobs.send_receipt.enqueue(order_id=order.pk)

    run_burst()

    assert {j.state for j in awa.get_jobs([first, second])} == {"completed"}
    assert SentEmail.objects.filter(order_id=order.pk).count() == 1


def test_stale_orders_are_cancelled_by_the_nightly_schedule():
    (schedule,) = [s for s in declared_schedules() if s.name == "shop.cancel_stale_orders"]
    assert (schedule.cron_expr, schedule.args) == ("0 3 * * *", {"older_than_days": 7})
    stale = make_order()
    Order.objects.filter(pk=stale.pk).update(created_at=timezone.now() - timedelta(days=8))
    fresh = make_order()
    BackgroundWorker(queues={}).start().stop()  # a worker start stores the schedule
    job_id = awa.cron.trigger("shop.cancel_stale_orders")
    run_burst()
    assert awa.get_job(job_id).state == "completed"
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.status, fresh.status) == (Order.Status.CANCELLED, Order.Status.PLACED)


def test_one_payment_reminder_is_queued_per_order_at_a_time():
    order = make_order()
    first = jobs.send_payment_reminder.enqueue(order_id=order.pk)
    again = awa.enqueue(
        jobs.send_payment_reminder, args={"order_id": order.pk}, on_conflict="return"
    )
    assert again == first
    run_burst()
    assert SentEmail.objects.filter(order_id=order.pk).count() == 1
    # Finished: the next reminder can be queued.
    assert jobs.send_payment_reminder.enqueue(order_id=order.pk) != first
