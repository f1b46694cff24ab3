"""The signed HTTP endpoint through Django's test client: accepted requests resolve the
callback; every refused one answers the right status with a JSON error and changes nothing."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client, override_settings

import awa_django as awa
from tests.callbacks.helpers import (
    FAST,
    SECRET,
    snapshot,
    wait_for_state,
    wait_for_token,
    wait_parked,
)
from tests.jobs import parks, waits

pytestmark = [pytest.mark.usefixtures("awa_db"), pytest.mark.django_db(transaction=True)]


@pytest.fixture
def client() -> Client:
    # CSRF checks on, as in production: the callback view must be exempt on its own.
    return Client(enforce_csrf_checks=True)


def post(client: Client, token: str, action: str, body: bytes | str, headers: dict[str, str]):
    return client.post(
        f"/awa/callbacks/{token}/{action}",
        data=body,
        content_type="application/json",
        headers=headers,
    )


def signed(client: Client, token: str, action: str, payload: object, **sign: object):
    body = json.dumps(payload)
    return post(client, token, action, body, awa.sign_callback(token, body, action=action, **sign))


def parked_job() -> tuple[int, str]:
    job_id = parks.enqueue()
    token = wait_for_token(job_id)
    wait_parked(job_id)
    return job_id, token


def test_signed_complete_is_accepted(worker, client):
    job_id, token = parked_job()
    assert awa.callback_url(token) == f"/awa/callbacks/{token}/complete"
    response = signed(client, token, "complete", {"payload": {"charge": "ch_9"}})
    assert response.status_code == 200, response.content
    assert response.json() == {"ok": True, "action": "complete", "outcome": "completed"}
    assert awa.get_job(job_id).result == {"charge": "ch_9"}
    # The same request again (a replay inside the window) resolves nothing twice.
    again = signed(client, token, "complete", {"payload": {"charge": "ch_9"}})
    assert again.status_code == 409
    assert "already closed as completed" in again.json()["error"]


def test_signed_fail_retry_and_heartbeat(worker, client):
    job_id, token = parked_job()
    response = signed(client, token, "heartbeat", {"timeout_s": 7200})
    assert response.status_code == 200, response.content
    assert "timeout_at" in response.json()
    response = signed(client, token, "fail", {"error": "insufficient funds"})
    assert response.json() == {"ok": True, "action": "fail", "outcome": "retryable"}
    second = wait_for_token(job_id, 2)
    wait_for_state(job_id, "waiting_external")
    response = signed(client, second, "retry", {"delay_s": 0})
    assert response.json() == {"ok": True, "action": "retry", "outcome": "failed"}  # 2 of 2
    assert awa.get_job(job_id).errors[0]["message"] == "insufficient funds"


def test_signed_resume_wakes_a_sequential_wait(worker, client):
    job_id = waits.enqueue()
    token = wait_for_token(job_id)
    wait_for_state(job_id, "waiting_external")
    response = signed(client, token, "resume", {"payload": {"step": 2}})
    assert response.status_code == 200, response.content
    wait_for_state(job_id, "completed")


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("no signature", 401),
        ("wrong signature", 401),
        ("wrong secret", 401),
        ("signed for another action", 401),
        ("body changed after signing", 401),
        ("replayed old timestamp", 401),
        ("timestamp from the future", 401),
        ("malformed json", 400),
        ("not an object", 400),
        ("unknown field", 400),
        ("missing required field", 400),
        ("nested 10,000 deep", 400),
        ("payload with a lone surrogate", 400),
        ("oversize body", 413),
        ("unknown token", 404),
        ("malformed token", 404),
        ("forged callback id", 409),
        ("unknown action", 404),
        ("payload too large for a result", 400),
    ],
)
def test_refused_requests_change_nothing(worker, client, case, status):
    job_id, token = parked_job()
    before = snapshot(job_id)
    target, action, body = token, "complete", json.dumps({"payload": 1})
    headers = awa.sign_callback(target, body)
    if case == "no signature":
        headers = {}
    elif case == "wrong signature":
        headers["X-Awa-Signature"] = "sha256=" + "0" * 64
    elif case == "wrong secret":
        headers = awa.sign_callback(target, body, secret="another-secret-" + "y" * 30)
    elif case == "signed for another action":
        headers = awa.sign_callback(target, body, action="resume")
    elif case == "body changed after signing":
        body = json.dumps({"payload": 2})
    elif case == "replayed old timestamp":
        headers = awa.sign_callback(target, body, timestamp=int(time.time()) - 301)
    elif case == "timestamp from the future":
        headers = awa.sign_callback(target, body, timestamp=int(time.time()) + 3600)
    elif case in (
        "malformed json",
        "not an object",
        "unknown field",
        "missing required field",
        "nested 10,000 deep",
        "payload with a lone surrogate",
    ):
        action, body = {
            "malformed json": ("complete", '{"payload": '),
            "not an object": ("complete", "[1, 2]"),
            "unknown field": ("complete", '{"payload": 1, "state": "completed"}'),
            "missing required field": ("fail", "{}"),
            "nested 10,000 deep": ("complete", '{"payload": ' + "[" * 10_000 + "]" * 10_000 + "}"),
            "payload with a lone surrogate": ("complete", '{"payload": "\\ud800"}'),
        }[case]
        headers = awa.sign_callback(target, body, action=action)
    elif case == "oversize body":
        body = json.dumps({"payload": "x" * 70_000})
        headers = awa.sign_callback(target, body)
    elif case == "payload too large for a result":
        with override_settings(AWA={**FAST, "CALLBACK_MAX_BODY_BYTES": 200_000}):
            body = json.dumps({"payload": "x" * 70_000})
            response = post(client, target, action, body, awa.sign_callback(target, body))
        assert response.status_code == status, response.content
        assert "payload" in response.json()["error"]
        assert snapshot(job_id) == before
        return
    elif case in ("unknown token", "malformed token", "forged callback id"):
        target = {
            "unknown token": f"987654-1-{'a' * 32}",
            "malformed token": "12-1-zz",
            "forged callback id": token.rsplit("-", 1)[0] + "-" + "0" * 32,
        }[case]
        headers = awa.sign_callback(target, body)
    elif case == "unknown action":
        action = "delete"
        headers = awa.sign_callback(target, body, action=action)
    response = post(client, target, action, body, headers)
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]
    assert snapshot(job_id) == before


# Each answered 500 before issue #24: the value reached PostgreSQL or the calendar unchecked.
@pytest.mark.parametrize(
    ("action", "body", "field", "message"),
    [
        ("heartbeat", '{"timeout_s": 1e300}', "timeout_s", "at most 3153600000"),
        ("heartbeat", '{"timeout_s": 1e12}', "timeout_s", "at most 3153600000"),
        ("heartbeat", '{"timeout_s": 1' + "0" * 400 + "}", "timeout_s", "at most"),
        ("retry", '{"delay_s": 1e300}', "delay_s", "at most 3153600000"),
        ("complete", '{"payload": {"name": "\\ud800"}}', "payload", "lone surrogate"),
        ("complete", '{"payload": {"\\udfff": 1}}', "payload", "lone surrogate"),
        ("resume", '{"payload": ["\\ud800"]}', "payload", "lone surrogate"),
        ("fail", '{"error": "declined \\udc00"}', "error", "lone surrogate"),
        (
            "complete",
            '{"payload": ' + "[" * 101 + "]" * 101 + "}",
            "payload",
            "more than 100 lists and dicts deep",
        ),
        ("complete", '{"payload": ' + "[" * 30_000 + "]" * 30_000 + "}", None, "100 levels"),
        ("complete", '{"payload": NaN}', None, "NaN is not a JSON value"),
        ("retry", '{"delay_s": Infinity}', None, "Infinity is not a JSON value"),
        ("complete", '{"payload": 1' + "0" * 5000 + "}", None, "body is not JSON"),
    ],
)
def test_values_past_the_limits_are_a_400_naming_the_field(
    worker, client, action, body, field, message
):
    job_id, token = parked_job()
    before = snapshot(job_id)
    response = post(client, token, action, body, awa.sign_callback(token, body, action=action))
    assert response.status_code == 400, response.content
    answer = response.json()
    assert message in answer["error"]
    assert answer.get("field") == field
    assert snapshot(job_id) == before


def test_a_payload_at_the_depth_limit_and_a_wait_at_the_time_limit_are_accepted(worker, client):
    job_id, token = parked_job()
    response = signed(client, token, "heartbeat", {"timeout_s": 100 * 365 * 86_400})
    assert response.status_code == 200, response.content
    timeout_at = datetime.fromisoformat(response.json()["timeout_at"])
    assert timeout_at > datetime.now(UTC) + timedelta(days=99 * 365)
    deep: list[object] = []
    for _ in range(99):
        deep = [deep]
    response = signed(client, token, "complete", {"payload": deep})
    assert response.status_code == 200, response.content
    assert awa.get_job(job_id).result == deep


def test_a_token_past_bigint_is_unknown(client):
    token = f"{2**63}-1-{'a' * 32}"
    with override_settings(AWA=FAST):
        response = post(client, token, "complete", "{}", awa.sign_callback(token, "{}"))
    assert response.status_code == 404, response.content


def test_without_a_secret_the_endpoint_refuses_unless_unsigned_is_allowed(worker, client):
    job_id, token = parked_job()
    before = snapshot(job_id)
    body = json.dumps({"payload": 1})
    with override_settings(AWA={**FAST, "CALLBACK_SECRET": ""}):
        response = post(client, token, "complete", body, {})
    assert response.status_code == 503
    assert "CALLBACK_SECRET" in response.json()["error"]
    assert snapshot(job_id) == before
    with override_settings(AWA={**FAST, "CALLBACK_SECRET": "", "CALLBACK_ALLOW_UNSIGNED": True}):
        response = post(client, token, "complete", body, {})
    assert response.status_code == 200
    assert awa.get_job(job_id).state == "completed"


def test_only_post_is_served(client):
    with override_settings(AWA=FAST):
        response = client.get(f"/awa/callbacks/1-1-{'a' * 32}/complete")
    assert response.status_code == 405


def test_signature_uses_hmac_sha256_over_timestamp_token_action_and_body():
    import hashlib
    import hmac

    headers = awa.sign_callback("5-1-" + "b" * 32, b'{"a":1}', secret=SECRET, timestamp=1700000000)
    message = b"1700000000.5-1-" + b"b" * 32 + b'.complete.{"a":1}'
    expected = hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()
    assert headers == {"X-Awa-Timestamp": "1700000000", "X-Awa-Signature": "sha256=" + expected}
