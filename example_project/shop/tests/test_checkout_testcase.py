"""How to test code that enqueues jobs, Django ``TestCase`` style (``manage.py test`` or pytest).

The test runs in one transaction that is rolled back afterwards: the order the view writes and
the job it enqueues in the same ``atomic()`` block are both visible to the test, and
``run_jobs()`` runs the job right there, the way a worker would.
"""

from __future__ import annotations

from datetime import timedelta

from django.test import TestCase

import awa_django as awa
from awa_django.testing import (
    advance_clock,
    assert_enqueued,
    assert_not_enqueued,
    perform,
    run_jobs,
)
from example_project.shop.jobs import send_receipt, sync_inventory
from example_project.shop.models import Order, SentEmail


class CheckoutTests(TestCase):
    def place_order(self, path: str = "/shop/orders/") -> dict[str, int]:
        response = self.client.post(
            path, {"email": "ann@example.com", "amount": "12.50"}, content_type="application/json"
        )
        return response.json()  # type: ignore[no-any-return]

    def test_an_order_enqueues_its_receipt_which_a_worker_run_sends(self):
        order_id = self.place_order()["order_id"]

        assert_enqueued(send_receipt, args={"order_id": order_id}, queue="email", count=1)
        self.assertFalse(SentEmail.objects.exists())

        result = run_jobs()

        self.assertEqual((result.completed, result.failed), (1, 0))
        self.assertEqual(SentEmail.objects.get().order_id, order_id)
        self.assertIsNotNone(Order.objects.get(pk=order_id).receipt_sent_at)
        assert_not_enqueued(send_receipt)

    def test_a_rejected_order_leaves_no_job(self):
        body = self.place_order("/shop/orders/rollback/")

        assert_not_enqueued(send_receipt)
        self.assertIsNone(awa.get_job(body["rolled_back_job_id"]))

    def test_a_flaky_job_is_retried_when_the_clock_moves(self):
        job_id = sync_inventory.enqueue(sku="A-1", failures_before_success=2)

        self.assertEqual(run_jobs().retried, 1)
        self.assertEqual(len(run_jobs()), 0)  # its retry is not due yet, and nothing sleeps
        advance_clock(timedelta(minutes=1))
        self.assertEqual(run_jobs().retried, 1)
        advance_clock(timedelta(minutes=1))
        self.assertEqual(run_jobs().completed, 1)

        job = awa.get_job(job_id)
        self.assertEqual((job.state, job.attempt, len(job.errors)), ("completed", 3, 2))

    def test_the_handler_alone(self):
        order = Order.objects.create(customer_email="bo@example.com", amount="3.00")

        perform(send_receipt, order_id=order.pk)

        self.assertEqual(SentEmail.objects.get().to, "bo@example.com")
