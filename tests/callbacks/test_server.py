"""End to end through a real HTTP server: ``manage.py runserver`` serves the example project's
fake payment provider and awa's callback endpoint; a worker runs ``shop.collect_payment``,
which parks until the provider's signed callback completes (or fails) it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from django.test import override_settings

import awa_django as awa
from example_project.shop.jobs import collect_payment
from example_project.shop.models import Order
from tests import conftest
from tests.callbacks.helpers import (
    FAST,
    SECRET,
    notes,
    park_one,
    snapshot,
    wait_for_state,
)
from tests.conftest import REPO_ROOT, BackgroundWorker, wait_until

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def server() -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DATABASE_URL": conftest.subprocess_database_url(),
        "AWA_CALLBACK_SECRET": SECRET,
        "AWA_CALLBACK_BASE_URL": base,
        "SHOP_PAYMENT_PROVIDER_URL": f"{base}/shop/provider/charges/",
        "PYTHONUNBUFFERED": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: accepts(port) or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, "runserver exited"
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def test_payment_provider_calls_back_through_a_real_server(server):
    awa_settings = {**FAST, "CALLBACK_BASE_URL": server, "JOB_MODULES": ["tests.jobs"]}
    provider_url = f"{server}/shop/provider/charges/"
    with override_settings(AWA=awa_settings, SHOP_PAYMENT_PROVIDER_URL=provider_url):
        worker = BackgroundWorker().start()
        try:
            order = Order.objects.create(customer_email="ann@example.com", amount="12.50")
            paid = collect_payment.enqueue(order_id=order.pk)
            declined = collect_payment.enqueue(order_id=order.pk, card="4000000000000002")
            wait_for_state(paid, "completed", timeout=30)
            result = awa.get_job(paid).result
            assert result["status"] == "succeeded"
            assert result["amount"] == "12.50"
            assert result["charge_id"].startswith("ch_")
            # Declined: every attempt's callback fails it, until it is out of attempts.
            wait_for_state(declined, "failed", timeout=60)
            errors = awa.get_job(declined).errors
            assert len(errors) == 3
            assert all(e["message"].startswith("card declined") for e in errors)
        finally:
            worker.stop()


def test_real_server_refuses_a_bad_signature_and_accepts_a_good_one(server):
    job_id, token = park_one()
    before = snapshot(job_id)
    url = f"{server}/awa/callbacks/{token}/complete"
    body = json.dumps({"payload": {"via": "http"}}).encode()

    def send(headers: dict[str, str]) -> tuple[int, dict]:
        request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json", **headers}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    forged = awa.sign_callback(token, body, secret="not-the-shared-secret-" + "z" * 20)
    status, answer = send(forged)
    assert status == 401, answer
    assert snapshot(job_id) == before
    status, answer = send(awa.sign_callback(token, body, secret=SECRET))
    assert (status, answer) == (200, {"ok": True, "action": "complete", "outcome": "completed"})
    assert awa.get_job(job_id).result == {"via": "http"}
    assert notes(job_id) == [f"token={token}"]
