"""How to test code that enqueues jobs, pytest style: the ``awa_jobs`` fixture (from the
plugin awa-django installs) runs in pytest-django's per-test transaction, like ``TestCase``."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import awa_django as awa
from example_project.shop.jobs import check_payment, send_receipt
from example_project.shop.models import Order, SentEmail


def place_order(client, path: str = "/shop/orders/") -> dict[str, int]:
    response = client.post(
        path, {"email": "cy@example.com", "amount": "7.00"}, content_type="application/json"
    )
    return response.json()


def test_an_order_enqueues_its_receipt_which_a_worker_run_sends(client, awa_jobs):
    order_id = place_order(client)["order_id"]

    awa_jobs.assert_enqueued(send_receipt, args={"order_id": order_id}, count=1)
    result = awa_jobs.run(queue="email")

    assert result.completed == 1
    assert SentEmail.objects.get().order_id == order_id


def test_a_rejected_order_leaves_no_job(client, awa_jobs):
    place_order(client, "/shop/orders/rollback/")

    awa_jobs.assert_not_enqueued()
    assert not Order.objects.exists()


def test_a_payment_poll_retries_at_the_providers_pace(awa_jobs):
    order = Order.objects.create(customer_email="di@example.com", amount="9.99")
    job_id = check_payment.enqueue(order_id=order.pk, pending_polls=1, retry_in_s=30)

    (first,) = awa_jobs.run().jobs
    assert first.outcome == "retryable" and isinstance(first.error, awa.RetryAfter)
    assert awa_jobs.advance_clock(timedelta(seconds=31)) == 1
    assert awa_jobs.run().completed == 1

    order.refresh_from_db()
    assert order.status == Order.Status.PAID
    assert awa.get_job(job_id).attempt == 2


@pytest.mark.django_db(transaction=True)
def test_committed_jobs_run_in_a_real_worker(awa_worker):
    order = Order.objects.create(customer_email="ed@example.com", amount="1.00")
    job_id = send_receipt.enqueue(order_id=order.pk)  # committed: the worker thread sees it

    deadline = time.monotonic() + 30
    while awa.get_job(job_id).state != "completed" and time.monotonic() < deadline:
        time.sleep(0.05)

    assert SentEmail.objects.filter(order_id=order.pk).exists()
