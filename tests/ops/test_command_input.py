"""Bad input to the awa_* commands is refused with a CommandError that names the option as it
is typed, before anything is printed or done: unknown states, queues, kinds and reasons, ids of
no job or past bigint, numbers out of range, text PostgreSQL cannot store, and options the
action does not use. A queue the settings no longer declare, or a kind no handler here
registers, stays reachable while the database holds jobs of it."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

import awa_django as awa
from tests.conftest import run_burst
from tests.jobs import noop, terminal
from tests.ops.helpers import manage

pytestmark = pytest.mark.usefixtures("awa_db")

QUEUES = {"default": {"dlq": True}, "email": {}}


@pytest.fixture(autouse=True)
def settings_with_a_dlq():
    with override_settings(AWA={"QUEUES": QUEUES}):
        yield


@pytest.fixture
def jobs() -> dict[str, str]:
    """Ids (as typed) of a waiting job and a dead-lettered one."""
    dead = terminal.enqueue()
    run_burst()
    return {"{waiting}": str(noop.enqueue()), "{dead}": str(dead)}


def refused(*args: str) -> tuple[str, str]:
    """The CommandError message of ``args``, and what was printed before it (nothing)."""
    out = StringIO()
    with pytest.raises(CommandError) as error:
        call_command(*args, stdout=out)
    return str(error.value), out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["awa_jobs", "list", "--state", "bogus"], "--state: invalid choice: 'bogus'"),
        (["awa_jobs", "list", "--queue", "nope"], "--queue: unknown queue 'nope'"),
        (["awa_jobs", "list", "--queue", ""], "--queue: must not be empty"),
        (["awa_jobs", "list", "--queue", "a\x00b"], "--queue: 'a\\x00b' is not text"),
        # What Python makes of a byte the terminal's encoding cannot decode.
        (["awa_jobs", "list", "--queue", "caf\udce9"], "is not text"),
        (["awa_jobs", "list", "--kind", "shop.nope"], "--kind: unknown job kind 'shop.nope'"),
        (["awa_jobs", "list", "--limit", "0"], "--limit: the limit must be a whole number"),
        (["awa_jobs", "list", "--limit", str(2**31)], "from 1 to 2147483647"),
        (["awa_jobs", "list", "--limit", "many"], "--limit"),
        (["awa_jobs", "list", "{waiting}"], "JOB_ID does not apply to list"),
        (["awa_jobs", "dump", "999999"], "JOB_ID: no such job: 999999"),
        (["awa_jobs", "dump", "{waiting}", "999998"], "no such job: 999998"),
        (["awa_jobs", "dump", str(2**63)], "JOB_ID: a job id must be a whole number from 1"),
        (["awa_jobs", "dump", "0"], "JOB_ID: a job id must be"),
        (["awa_jobs", "dump", "x"], "JOB_ID: a job id must be"),
        (["awa_jobs", "dump", "{waiting}", "--state", "failed"], "--state does not apply to dump"),
        (["awa_jobs", "cancel", "999999"], "no such job: 999999"),
        (["awa_jobs", "cancel", "{waiting}", "--to-queue", "email"], "--to-queue does not apply"),
        (["awa_jobs", "retry", "{dead}", "--to-queue", "nope"], "--to-queue: queue 'nope' is not"),
        (["awa_jobs", "retry", "{dead}", "--reason", "x"], "--reason does not apply to retry"),
        (["awa_dlq", "list", "--queue", "nope"], "--queue: unknown queue 'nope'"),
        (["awa_dlq", "list", "--kind", "shop.nope"], "--kind: unknown job kind"),
        (["awa_dlq", "list", "--reason", "bogus"], "--reason: invalid choice: 'bogus'"),
        (["awa_dlq", "list", "--older-than", "-1"], "--older-than: seconds must be from 0"),
        (["awa_dlq", "list", "--older-than", "nan"], "--older-than: seconds must be from 0"),
        (["awa_dlq", "list", "--older-than", "1e300"], "--older-than: seconds must be from 0"),
        (["awa_dlq", "list", "--limit", "-3"], "--limit"),
        (["awa_dlq", "list", "--to-queue", "email"], "--to-queue does not apply to list"),
        (["awa_dlq", "depth", "--queue", "nope"], "--queue: unknown queue 'nope'"),
        (["awa_dlq", "depth", "--limit", "5"], "--limit does not apply to depth"),
        (["awa_dlq", "retry"], "retry needs JOB_IDs, a filter (--queue, --kind, --reason, "),
        (["awa_dlq", "purge"], "or --all; nothing was done"),
        (["awa_dlq", "move-failed"], "a filter (--queue, --kind, --older-than) or --all"),
        (["awa_dlq", "move-failed", "--reason", "terminal_error"], "--reason does not apply"),
        (["awa_dlq", "retry", "{dead}", "--queue", "default"], "use --to-queue"),
        (["awa_dlq", "purge", "{dead}", "--all"], "--all selects the entries of a bulk purge"),
        (["awa_dlq", "purge", "999999"], "JOB_ID: no such job: 999999"),
        (["awa_dlq", "retry", "--all", "--to-queue", "nope"], "--to-queue: queue 'nope' is not"),
        (["awa_dlq", "retry", "--all", "--priority", "7"], "--priority: invalid choice: 7"),
        (["awa_dlq", "retry", "--all", "--run-in", "inf"], "--run-in: seconds must be"),
        (["awa_queue", "pause", "nope"], "QUEUE: unknown queue 'nope'"),
        (["awa_queue", "resume", "default", "--yes"], "--yes does not apply to resume"),
        (["awa_queue", "drain", "default", "--by", "bob"], "--by does not apply to drain"),
        (["awa_shards", "nope"], "QUEUE: unknown queue 'nope'"),
        (["awa_shards", "default", "0"], "N: shards must be a whole number from 1 to 64"),
        (["awa_shards", "default", "65"], "N: shards must be a whole number from 1 to 64"),
        (["awa_cron", "pause", "nope"], "NAME: no cron schedule named 'nope'"),
        (["awa_cron", "trigger", ""], "NAME: must not be empty"),
    ],
)
def test_bad_input_is_refused_naming_the_option(jobs, args, message):
    states = {job_id: awa.get_job(int(job_id)).state for job_id in jobs.values()}
    error, printed = refused(*(jobs.get(arg, arg) for arg in args))
    assert message in error
    assert printed == ""
    assert {job_id: awa.get_job(int(job_id)).state for job_id in jobs.values()} == states


def test_a_drain_of_an_unknown_queue_asks_nothing(monkeypatch):
    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail(f"asked: {prompt}"))
    error, _ = refused("awa_queue", "drain", "nope")
    assert "QUEUE: unknown queue 'nope'" in error


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_an_undeclared_queue_and_an_unregistered_kind_that_hold_jobs_stay_reachable():
    retired = {"QUEUES": {**QUEUES, "legacy": {}}, "EXTERNAL_KINDS": ["shop.retired_kind"]}
    with override_settings(AWA=retired):
        waiting = awa.enqueue("shop.retired_kind", args={}, queue="legacy")
        scheduled = awa.enqueue(
            "shop.retired_kind", args={}, queue="legacy", run_at=timedelta(hours=1)
        )
    # "legacy" is gone from the settings, and no handler registers shop.retired_kind.
    listed = run("awa_jobs", "list", "--queue", "legacy", "--kind", "shop.retired_kind")
    assert [line.split()[0] for line in listed.splitlines()[1:]] == [str(scheduled), str(waiting)]
    assert run("awa_dlq", "list", "--queue", "legacy").splitlines()[1:] == []
    assert "legacy" in run("awa_shards", "legacy")
    assert run("awa_queue", "pause", "legacy") == "paused legacy\n"
    drained = run("awa_queue", "drain", "legacy", "--yes")
    assert drained == "drained legacy: cancelled 2 pending jobs\n"
    assert awa.get_job(waiting).state == "cancelled"
    # Putting work on it takes a declared queue.
    error, _ = refused("awa_jobs", "retry", str(waiting), "--to-queue", "legacy")
    assert "--to-queue: queue 'legacy' is not declared" in error


def test_bad_input_exits_non_zero_with_nothing_on_stdout(jobs):
    # The example settings declare default, email and partners.
    for args, status, message in [
        (["awa_jobs", "list", "--state", "bogus"], 2, "argument --state: invalid choice"),
        (["awa_dlq", "list", "--queue", "nope"], 1, "CommandError: --queue: unknown queue"),
        (["awa_jobs", "dump", "999999"], 1, "CommandError: JOB_ID: no such job: 999999"),
        (["awa_dlq", "retry"], 1, "or --all"),
    ]:
        result = manage(*args)
        assert result.returncode == status, result.stdout + result.stderr
        assert message in result.stderr
        assert result.stdout == ""
        assert "Traceback" not in result.stderr
