"""The close statement's batch document: what each completion sends, without a database."""

from __future__ import annotations

import dataclasses
import json

import pytest

from awa_django.core.completion import Completion
from awa_django.core.outcome import Outcome
from awa_django.storage.execution import close_params

ADDRESS = {
    "ready_slot": 3,
    "queue": "email",
    "priority": 2,
    "shard": 1,
    "lane_seq": 40_401,
    "job_id": 40_399,
    "run_lease": 7,
}


def batch(*completions: Completion) -> list[dict[str, object]]:
    return json.loads(close_params(completions)["batch"])


def test_a_plain_success_sends_its_address_and_outcome_only() -> None:
    (item,) = batch(Completion(**ADDRESS, outcome=Outcome.COMPLETED, kind="k", attempt=1))
    assert item == {**ADDRESS, "outcome": "completed"}


@pytest.mark.parametrize("queue", ['we"ird\\queue', "ünïcode-κ", "tab\there"])
def test_queue_names_are_json_escaped(queue: str) -> None:
    (item,) = batch(Completion(**{**ADDRESS, "queue": queue}, outcome=Outcome.COMPLETED))
    assert item["queue"] == queue


def test_completions_with_details_send_them_beside_plain_ones() -> None:
    error = {"attempt": 1, "message": "boom"}
    plain = Completion(**ADDRESS, outcome=Outcome.COMPLETED)
    retry = Completion(
        **{**ADDRESS, "job_id": 5}, outcome=Outcome.RETRYABLE, delay_s=0.25, error=error
    )
    stored = Completion(**{**ADDRESS, "job_id": 6}, outcome=Outcome.COMPLETED, result_json="[1]")
    first, second, third = batch(plain, retry, stored)
    assert first == {**ADDRESS, "outcome": "completed"}
    assert second["outcome"] == "retryable" and second["job_id"] == 5
    # A delay, not a time: the database adds it to its own clock.
    assert second["delay_s"] == 0.25 and second["error"] == error
    assert third["result"] == "[1]" and third["outcome"] == "completed"
    # Fields that are not set are left out, for every item.
    assert set(second) == {*ADDRESS, "outcome", "delay_s", "error"}
    assert set(third) == {*ADDRESS, "outcome", "result"}


def test_an_address_that_is_not_an_integer_is_refused() -> None:
    bad = dataclasses.replace(
        Completion(**ADDRESS, outcome=Outcome.COMPLETED),
        job_id='1,"outcome":"failed"',  # type: ignore[arg-type]
    )
    with pytest.raises(ValueError):
        close_params([bad])


def test_a_workflow_step_is_flagged_and_an_ordinary_job_is_not() -> None:
    from datetime import UTC, datetime

    from awa_django.core.claimed_job import ClaimedJob

    def claimed(metadata: dict[str, object]) -> ClaimedJob:
        now = datetime.now(UTC)
        return ClaimedJob(
            "email", 2, 1, 40_401, 3, 40_399, "k", {}, 1, 7, 3, now, now, metadata, [], []
        )

    step = Completion.of(claimed({"awa:workflow": {"id": 1, "step": "a"}}), Outcome.COMPLETED)
    plain = Completion.of(claimed({}), Outcome.COMPLETED)
    failed = dataclasses.replace(step, outcome=Outcome.FAILED, error={"message": "x"})
    # With its workflow's id, which spares the close a lookup before the workflow's lock.
    assert batch(step, plain, failed) == [
        {**ADDRESS, "outcome": "completed", "wf": 1, "wf_id": 1},
        {**ADDRESS, "outcome": "completed"},
        {**ADDRESS, "outcome": "failed", "wf": 1, "wf_id": 1, "error": {"message": "x"}},
    ]
    # A completion rebuilt from another (the completer's replacement) keeps the flag and id.
    rebuilt = Completion.of(step, Outcome.FAILED)
    assert rebuilt.workflow and rebuilt.workflow_id == 1
    # A step whose metadata gives no workflow id is still flagged: the close looks it up.
    unnamed = Completion.of(claimed({"awa:workflow": {"step": "a"}}), Outcome.COMPLETED)
    assert batch(unnamed) == [{**ADDRESS, "outcome": "completed", "wf": 1}]
