"""The shop's views enqueue in the order's transaction: committed together or not at all."""

from __future__ import annotations

import pytest
from django.test import Client

import awa_django as awa
from example_project.shop.models import Order, SentEmail
from tests.conftest import run_burst

pytestmark = pytest.mark.usefixtures("awa_db")


def post(client: Client, url: str, body: object):
    return client.post(url, body, content_type="application/json")


def test_order_view_commits_order_and_job_that_a_worker_completes(client):
    response = post(client, "/shop/orders/", {"email": "ann@example.com", "amount": "12.50"})

    assert response.status_code == 201
    order_id, job_id = response.json()["order_id"], response.json()["job_id"]
    order = Order.objects.get(pk=order_id)
    assert (order.customer_email, str(order.amount)) == ("ann@example.com", "12.50")
    assert order.receipt_sent_at is None
    job = awa.get_job(job_id)
    assert (job.kind, job.queue, job.state, job.args) == (
        "shop.send_receipt",
        "email",
        "available",
        {"order_id": order_id},
    )

    summary = run_burst()

    assert summary.claimed == 1
    assert awa.get_job(job_id).state == "completed"
    order.refresh_from_db()
    assert order.receipt_sent_at is not None
    mail = SentEmail.objects.get()
    assert (mail.to, mail.order_id, mail.job_id) == ("ann@example.com", order_id, job_id)


def test_rollback_view_leaves_no_order_and_no_job(client):
    response = post(client, "/shop/orders/rollback/", {"email": "eve@example.com", "amount": "5"})

    assert response.status_code == 409
    body = response.json()
    # The ids were really assigned inside the transaction ...
    assert isinstance(body["rolled_back_order_id"], int)
    assert isinstance(body["rolled_back_job_id"], int)
    # ... and rolled back with it: nothing to see, nothing for a worker to run.
    assert not Order.objects.exists()
    assert awa.get_job(body["rolled_back_job_id"]) is None
    assert run_burst().claimed == 0
    assert not SentEmail.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"email": "not-an-email", "amount": "10"},
        {"email": "ann@example.com", "amount": "-1"},
        {"email": "ann@example.com", "amount": "1.005"},
        {"email": "ann@example.com", "amount": "NaN"},
        {"email": "ann@example.com"},
        ["not", "an", "object"],
    ],
)
def test_order_view_rejects_bad_bodies_without_writing(client, body):
    response = post(client, "/shop/orders/", body)

    assert response.status_code == 400
    assert response.json()["error"]
    assert not Order.objects.exists()
    assert run_burst().claimed == 0


def test_order_views_only_accept_post(client):
    assert client.get("/shop/orders/").status_code == 405
    assert client.get("/shop/orders/rollback/").status_code == 405
