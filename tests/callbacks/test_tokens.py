"""Tokens and callback URLs, without a database."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

import awa_django as awa
from awa_django.callbacks.tokens import format_token, new_callback, parse_token
from tests.callbacks.helpers import FAST


def test_token_round_trip_and_unguessable_part():
    ref = new_callback(42, 3)
    token = format_token(ref)
    assert token.startswith("42-3-")
    assert parse_token(token) == ref
    assert new_callback(42, 3).callback_id != ref.callback_id
    assert ref.callback_id.version == 4


@pytest.mark.parametrize(
    "token",
    [
        "",
        "42-3",
        "42-3-abc",
        "0-1-" + "a" * 32,
        "42-3-" + "A" * 32,
        "42-3-" + "a" * 33,
        None,
        42,
        # Nineteen digits, one past bigint: no attempt can have these numbers.
        f"{2**63}-1-" + "a" * 32,
        f"1-{2**63}-" + "a" * 32,
    ],
)
def test_malformed_tokens_are_unknown(token):
    with pytest.raises(awa.UnknownCallback):
        parse_token(token)


def test_the_largest_bigint_ids_are_still_a_token():
    ref = parse_token(f"{2**63 - 1}-{2**63 - 1}-" + "a" * 32)
    assert (ref.job_id, ref.run_lease) == (2**63 - 1, 2**63 - 1)


def test_callback_url_uses_the_base_url_and_checks_its_arguments():
    token = format_token(new_callback(7, 1))
    with override_settings(AWA={**FAST, "CALLBACK_BASE_URL": "https://shop.example.com/"}):
        assert awa.callback_url(token, "resume") == (
            f"https://shop.example.com/awa/callbacks/{token}/resume"
        )
        with pytest.raises(awa.InvalidCallback, match="action"):
            awa.callback_url(token, "delete")
        with pytest.raises(awa.UnknownCallback):
            awa.callback_url("nope")
    assert uuid.UUID(hex=token.rsplit("-", 1)[1])
