"""``manage.py awa_enqueue``: each option reaches ``awa.enqueue``, only the new job's id is
printed, bad input is refused by ``awa.enqueue``'s own validation with one line naming the
option and nothing enqueued, and a unique conflict exits 3 naming the job that holds the key;
through call_command and as a real ``manage.py`` process."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from django.utils import timezone

import awa_django as awa
from tests.ops.helpers import manage

pytestmark = pytest.mark.usefixtures("awa_db")

QUEUES = {"default": {}, "email": {}}


@pytest.fixture(autouse=True)
def two_queues():
    with override_settings(AWA={"QUEUES": QUEUES}, TIME_ZONE="Europe/Paris"):
        yield


def enqueue(*args: str) -> str:
    out = StringIO()
    call_command("awa_enqueue", *args, stdout=out)
    return out.getvalue()


def test_every_option_reaches_the_job_and_only_its_id_is_printed():
    printed = enqueue(
        "tests.typed",
        "--args",
        '{"user_id": 7, "email": "ada@example.com", "tags": ["a"]}',
        "--queue",
        "email",
        "--priority",
        "1",
        "--max-attempts",
        "4",
        "--metadata",
        '{"request_id": "4f1c"}',
        "--tag",
        "ops",
        "--tag",
        "manual",
    )
    assert printed.endswith("\n") and printed.strip().isdigit()
    job = awa.get_job(int(printed))
    assert job is not None
    assert (job.kind, job.state, job.queue, job.priority, job.max_attempts) == (
        "tests.typed",
        "available",
        "email",
        1,
        4,
    )
    assert job.args == {"user_id": 7, "email": "ada@example.com", "tags": ["a"]}
    assert job.metadata["request_id"] == "4f1c"
    assert job.tags == ["ops", "manual"]


def test_without_options_the_decorator_and_settings_defaults_apply():
    job = awa.get_job(int(enqueue("tests.noop")))
    assert job is not None
    assert (job.queue, job.args, job.max_attempts, job.state) == ("default", {}, 25, "available")


def test_delay_and_run_at_schedule_the_job():
    before = timezone.now()
    delayed = awa.get_job(int(enqueue("tests.noop", "--delay", "3600")))
    assert delayed is not None and delayed.state == "scheduled"
    assert before + timedelta(hours=1) <= delayed.run_at <= timezone.now() + timedelta(hours=1)

    at = awa.get_job(int(enqueue("tests.noop", "--run-at", "2099-01-02T03:04:05+00:00")))
    assert at is not None and at.run_at == datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
    # Without an offset the time is read in TIME_ZONE (Paris is UTC+1 in January).
    local = awa.get_job(int(enqueue("tests.noop", "--run-at", "2099-01-02T03:04:05")))
    assert local is not None and local.run_at == datetime(2099, 1, 2, 2, 4, 5, tzinfo=UTC)


def test_ordering_key_goes_with_the_job():
    job = awa.get_job(int(enqueue("tests.noop", "--ordering-key", "customer-7")))
    assert job is not None and job.metadata["awa:ordering_key"] == "customer-7"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tests.nope"], "KIND: kind 'tests.nope' has no handler in this process. Did you"),
        (["tests.noop", "--args", "{n: 1}"], "--args: not valid JSON"),
        (["tests.noop", "--args", "[1]"], "--args: args must be a dict"),
        (["tests.noop", "--args", '{"m": 1}'], "--args: "),
        (["tests.typed", "--args", '{"user_id": 1}'], "--args: "),
        (["tests.noop", "--args", '{"n": NaN}'], "--args: args.n"),
        (["tests.noop", "--queue", "nope"], "--queue: queue 'nope' of job 'tests.noop' is unknown"),
        (["tests.noop", "--queue", ""], "--queue: must not be empty"),
        (["tests.noop", "--priority", "9"], "--priority: priority must be an integer 1..4"),
        (["tests.noop", "--priority", "high"], "--priority: 'high' is not a whole number"),
        (["tests.noop", "--max-attempts", "0"], "--max-attempts: max_attempts must be"),
        (["tests.noop", "--run-at", "tomorrow"], "--run-at: 'tomorrow' is not an ISO 8601"),
        (["tests.noop", "--delay", "-1"], "--delay: seconds must be from 0"),
        (["tests.noop", "--delay", "1", "--run-at", "2099-01-01"], "not allowed with argument"),
        (["tests.noop", "--metadata", '"x"'], "--metadata: metadata must be a dict"),
        (["tests.noop", "--metadata", '{"a": "\\u0000"}'], "--metadata: metadata.a"),
        (["tests.noop", "--tag", ""], "--tag: must not be empty"),
        (["tests.noop"] + ["--tag", "t"] * 21, "--tag: tags must be at most 20"),
        (["tests.noop", "--unique-states", "gone"], "--unique: Unique.states must be"),
        (["tests.noop", "--unique-period", "0.5"], "--unique: Unique.period must be"),
        (["tests.noop", "--on-conflict", "skip"], "--on-conflict: invalid choice: 'skip'"),
    ],
)
def test_bad_input_is_refused_naming_the_option_and_nothing_is_enqueued(args, message):
    out = StringIO()
    with pytest.raises(CommandError) as error:
        call_command("awa_enqueue", *args, stdout=out)
    assert message in str(error.value)
    assert out.getvalue() == ""
    assert awa.list_jobs() == []


def test_a_unique_conflict_names_the_holder_and_on_conflict_return_prints_it():
    first = enqueue("tests.noop", "--args", '{"n": 1}', "--unique")
    with pytest.raises(CommandError) as error:
        enqueue("tests.noop", "--args", '{"n": 1}', "--unique")
    assert error.value.returncode == 3
    assert f"already enqueued (job {first.strip()})" in str(error.value)
    again = enqueue("tests.noop", "--args", '{"n": 1}', "--unique", "--on-conflict", "return")
    assert again == first
    # Other arguments, or a key made of the other ones only, are another job.
    assert enqueue("tests.noop", "--args", '{"n": 2}', "--unique") != first
    by_nothing = enqueue("tests.noop", "--args", '{"n": 3}', "--unique-by", "m")
    with pytest.raises(CommandError, match=f"job {by_nothing.strip()}"):
        enqueue("tests.noop", "--args", '{"n": 4}', "--unique-by", "m")
    # A job declared unique conflicts without --unique.
    held = enqueue("tests.unique_record")
    with pytest.raises(CommandError, match=f"job {held.strip()}"):
        enqueue("tests.unique_record")
    assert len(awa.list_jobs()) == 4


def test_a_kind_this_process_does_not_register_takes_external_kinds():
    # The kind of another service's handler, the one its workers run.
    with pytest.raises(CommandError, match=r"KIND: kind 'billing\.charge' has no handler"):
        enqueue("billing.charge", "--args", '{"cents": 7}')
    with override_settings(AWA={"QUEUES": QUEUES, "EXTERNAL_KINDS": ["billing.*"]}):
        job = awa.get_job(int(enqueue("billing.charge", "--args", '{"cents": 7}')))
    assert job is not None and job.args == {"cents": 7}


def test_manage_py_prints_only_the_id_and_refuses_with_one_line():
    env = {"AWA_JOB_MODULES": "tests.jobs"}
    ok = manage("awa_enqueue", "tests.noop", "--args", '{"n": 5}', env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == "" and ok.stdout.strip().isdigit() and ok.stdout.count("\n") == 1
    job = awa.get_job(int(ok.stdout))
    assert job is not None and (job.kind, job.args) == ("tests.noop", {"n": 5})

    for bad_args in ('{"user_id": "x"}', "{user_id: 1}"):
        bad = manage("awa_enqueue", "tests.typed", "--args", bad_args, env=env)
        assert bad.returncode == 1 and bad.stdout == ""
        assert bad.stderr.count("\n") == 1 and bad.stderr.startswith("CommandError: --args: ")

    unique = ["awa_enqueue", "tests.unique_record", "--args", '{"n": 1}']
    first = manage(*unique, env=env)
    conflict = manage(*unique, env=env)
    assert conflict.returncode == 3 and conflict.stdout == ""
    assert f"(job {first.stdout.strip()})" in conflict.stderr
    assert conflict.stderr.count("\n") == 1
    assert manage(*unique, "--on-conflict", "return", env=env).stdout == first.stdout
    assert [j.job_id for j in awa.list_jobs()] == [int(first.stdout), int(ok.stdout)]


def test_wait_prints_the_result_or_exits_naming_how_the_job_ended(worker_process):
    env = {"AWA_JOB_MODULES": "tests.jobs"}
    # No worker yet: the job cannot end in time; its id is printed all the same.
    late = manage("awa_enqueue", "tests.noop", "--args", '{"n": 1}', "--wait", "0.3", env=env)
    assert late.returncode == 5, late.stderr
    late_id = late.stdout.strip()
    assert late_id.isdigit() and late.stderr.count("\n") == 1
    assert f"job {late_id} (tests.noop) still available after 0.3s" in late.stderr

    worker_process().wait_ready()
    done = manage(
        "awa_enqueue",
        "tests.returns_value",
        "--args",
        '{"value": {"paid": true}}',
        "--wait",
        "60",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    job_id, result = done.stdout.splitlines()
    assert json.loads(result) == {"paid": True}
    assert awa.get_job(int(job_id)).result == {"paid": True}  # type: ignore[union-attr]

    failed = manage("awa_enqueue", "tests.terminal", "--wait", "60", env=env)
    assert failed.returncode == 4 and failed.stdout.strip().isdigit()
    assert f"job {failed.stdout.strip()} (tests.terminal) ended failed: card declined" in (
        failed.stderr
    )

    bad = manage("awa_enqueue", "tests.noop", "--args", '{"n": 1}', "--wait", "-1", env=env)
    assert (
        bad.returncode == 1 and bad.stdout == "" and bad.stderr.startswith("CommandError: --wait")
    )
