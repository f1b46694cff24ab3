"""Long bulk commands show how far they are: on a terminal ``awa_dlq retry|purge|move-failed``
rewrite one progress line after each committed batch and end with the total; written to a pipe
or a file they print the total alone."""

from __future__ import annotations

import io
import os
import pty
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import override_settings

import awa_django as awa
from awa_django.testing import run_jobs
from tests.jobs import terminal

pytestmark = pytest.mark.usefixtures("awa_db")


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(awa.dlq, "BULK_BATCH_SIZE", 2)
    with override_settings(AWA={"QUEUES": {"default": {"dlq": True}, "email": {}}}):
        yield


class Terminal:
    """A real pseudo-terminal: what a command writes to its slave end, read from the master."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        self.stdout = os.fdopen(slave, "w")

    def read(self) -> str:
        self.stdout.flush()
        self.stdout.close()
        chunks = []
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the slave end is closed and everything was read
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(self.master)
        # The terminal turns each "\n" into "\r\n".
        return b"".join(chunks).decode().replace("\r\n", "\n")


def dead_letters(count: int, queue: str = "default") -> None:
    awa.enqueue_many(terminal, [{}] * count, queue=queue)
    run_jobs()


def test_a_bulk_retry_on_a_terminal_shows_a_running_count_then_the_total():
    dead_letters(5)
    screen = Terminal()
    call_command("awa_dlq", "retry", "--all", stdout=screen.stdout)
    # The total overwrites the running count, padded to cover it.
    total = "retried 5 entries".ljust(len("retried 4 entries so far"))
    assert screen.read() == f"\rretried 2 entries so far\rretried 4 entries so far\r{total}\n"
    assert awa.dlq.depth() == 0


def test_a_bulk_purge_and_move_failed_count_on_a_terminal_too():
    dead_letters(3)
    screen = Terminal()
    call_command("awa_dlq", "purge", "--queue", "default", stdout=screen.stdout)
    total = "purged 3 entries".ljust(len("purged 2 entries so far"))
    assert screen.read() == f"\rpurged 2 entries so far\r{total}\n"

    dead_letters(3, queue="email")
    screen = Terminal()
    call_command("awa_dlq", "move-failed", "--all", stdout=screen.stdout)
    assert screen.read().endswith(
        "\rmoved 2 failed jobs into the DLQ so far\rmoved 3 failed jobs into the DLQ"
        + " " * 7
        + "\n"
    )


def test_written_to_a_pipe_or_file_a_bulk_command_prints_only_its_total():
    dead_letters(5)
    out = io.StringIO()
    call_command("awa_dlq", "retry", "--all", stdout=out)
    assert out.getvalue() == "retried 5 entries\n"
