"""Return values a handler asks to keep (django.tasks results): checked once, kept only when the
attempt completes."""

from __future__ import annotations

import pytest

from awa_django.core.completion import result_to_completion
from awa_django.core.handler_result import (
    MAX_RESULT_BYTES,
    HandlerResult,
    StoredReturn,
    capped_json,
)
from awa_django.core.outcome import Outcome
from awa_django.exceptions import InvalidCallback, InvalidReturnValue, TerminalError
from tests.unit.test_executor_mapping import NOW, POLICY, claimed


def test_a_json_value_is_kept_as_compact_text():
    assert StoredReturn.of({"a": [1, "b"]}).json == '{"a":[1,"b"]}'
    assert StoredReturn.of(None).json == "null"


@pytest.mark.parametrize("value", [{1, 2}, (1, 2), float("nan"), "x" * MAX_RESULT_BYTES])
def test_unstorable_values_are_terminal_errors(value):
    with pytest.raises(InvalidReturnValue) as caught:
        StoredReturn.of(value)
    assert isinstance(caught.value, TerminalError)


def test_a_callback_payload_is_capped_as_a_return_value_is_with_its_own_error():
    with pytest.raises(
        InvalidCallback,
        match=rf"^payload is \d+ bytes of JSON, over the {MAX_RESULT_BYTES}-byte cap$",
    ):
        capped_json("x" * MAX_RESULT_BYTES, field="payload", error=InvalidCallback)
    with pytest.raises(InvalidCallback, match="payload"):
        capped_json({1, 2}, field="payload", error=InvalidCallback)
    assert capped_json([1, "b"], field="payload", error=InvalidCallback) == '[1,"b"]'


def test_the_value_is_written_only_for_a_completed_attempt():
    done = result_to_completion(claimed(), HandlerResult(result_json="42"), now=NOW, policy=POLICY)
    assert done.outcome is Outcome.COMPLETED and done.result_json == "42"
    plain = result_to_completion(claimed(), HandlerResult(), now=NOW, policy=POLICY)
    assert plain.result_json is None
    failed = result_to_completion(
        claimed(), HandlerResult(RuntimeError("x"), result_json="42"), now=NOW, policy=POLICY
    )
    assert failed.outcome is Outcome.RETRYABLE and failed.result_json is None
