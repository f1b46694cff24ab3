"""docs/getting-started.md, run as written: its blocks, in page order, in a new project in a
temporary directory (not the checkout's example project), on a database of its own, with the
checkout's awa_django on ``PYTHONPATH``. The conventions are the ones the page states:

- A Python block whose first line is a comment naming a file (``# shop/jobs.py``) goes into that
  file: the first block naming a file replaces it, later ones and blocks marked
  ``(add at the end)`` are appended. After every block that goes into the settings module the
  test appends its own ``DATABASES``, so the page's placeholder never reaches a server.
- Any other Python block runs on its own with ``python manage.py shell --no-imports -c``; the
  comment after each ``print(...)`` is the line it must print.
- Shell blocks run line by line in the project directory. ``pip install`` is not run (the
  checkout is already importable); the line must name the package by path, the only form that
  works before a release. ``createdb`` is not run either (the test has its own database); it
  must name the settings' database. ``django-admin ARGS`` runs as ``python -m django ARGS``. A
  ``manage.py awa_worker`` without ``--burst`` runs until it logs ``worker ready`` and is then
  stopped with SIGTERM, which must end it with status 0.

Every command must exit 0, and once the page has run, the jobs it enqueued must be in the
states the page says they end in."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from tests.conftest import wait_until
from tests.fresh_project import ROOT, FreshDatabase, fresh_database, project_env, run_django

PAGE = ROOT / "docs" / "getting-started.md"
SETTINGS_MODULE = "mysite.settings"
SETTINGS_FILE = "mysite/settings.py"
FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"# (?P<path>[\w./-]+\.py)(?P<note>.*)")
APPEND_NOTE = "(add at the end)"
PRINTED = re.compile(r"\s*print\(.*\)\s+# (?P<output>.*)")
PIP_PATH = "/path/to/awa_django"
COMMAND_TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int

    def __str__(self) -> str:
        return f"the {self.lang} block at docs/getting-started.md:{self.line}"


def page_blocks() -> list[Block]:
    text = PAGE.read_text()
    return [
        Block(m["lang"], m["code"], text.count("\n", 0, m.start()) + 1)
        for m in FENCE.finditer(text)
    ]


def stated_output(block: Block) -> list[str]:
    """The lines a shell block prints, from the comments after its ``print(...)`` calls."""
    expected = []
    for line in block.code.splitlines():
        if line.lstrip().startswith("print("):
            printed = PRINTED.fullmatch(line)
            assert printed, f"{block}: state what `{line.strip()}` prints in a comment after it"
            expected.append(printed["output"])
    return expected


@dataclass
class PageRun:
    """The project the page builds, and what its commands printed."""

    project: Path
    database: FreshDatabase
    env: dict[str, str]
    written: set[str] = field(default_factory=set)
    worker_output: list[str] = field(default_factory=list)
    pip_lines: list[str] = field(default_factory=list)
    created_databases: list[str] = field(default_factory=list)
    test_runs: list[str] = field(default_factory=list)
    workers: int = 0

    def run(self, block: Block) -> None:
        if block.lang == "python":
            header = FILE_HEADER.fullmatch(block.code.splitlines()[0])
            if header:
                self.write(header["path"], header["note"], block)
            else:
                self.shell(block)
        elif block.lang == "sh":
            for line in block.code.splitlines():
                if words := shlex.split(line, comments=True):
                    self.command(words, block)
        else:
            pytest.fail(f"{block}: only python and sh blocks can be run")

    # Python blocks ---------------------------------------------------------------------------

    @property
    def databases_trailer(self) -> str:
        databases = self.database.databases_setting()
        return f"\n\n# tests/docs: the test's own database\nDATABASES = {databases}\n"

    def write(self, path: str, note: str, block: Block) -> None:
        target = self.project / path
        assert target.parent.is_dir(), f"{block}: {target.parent} does not exist yet"
        append = path in self.written or APPEND_NOTE in note
        text = target.read_text() if append else ""
        if path == SETTINGS_FILE:
            text = text.replace(self.databases_trailer, "")
        text = f"{text}\n\n{block.code}" if text else block.code
        if path == SETTINGS_FILE:
            text += self.databases_trailer
        target.write_text(text)
        self.written.add(path)

    def shell(self, block: Block) -> None:
        expected = stated_output(block)
        result = self.manage(["shell", "--no-imports", "-c", block.code])
        assert result.returncode == 0, f"{block} failed:\n{result.stdout}\n{result.stderr}"
        assert result.stdout.splitlines() == expected, f"{block} printed:\n{result.stdout}"

    # Shell blocks ----------------------------------------------------------------------------

    def command(self, words: list[str], block: Block) -> None:
        if words[:2] == ["pip", "install"]:
            assert words[2].startswith(PIP_PATH), f"{block}: install by path, not {words[2]}"
            self.pip_lines.append(" ".join(words))
            return
        if words[0] == "createdb":
            self.created_databases.append(" ".join(words[1:]))
            return
        if words[0] == "django-admin":
            result = run_django(self.env, words[1:], cwd=self.project)
        elif words[:2] == ["python", "manage.py"]:
            args = words[2:]
            if args[0] == "awa_worker" and "--burst" not in args:
                self.run_until_ready(args, block)
                return
            result = self.manage(args)
            if args[0] == "awa_worker":
                self.worker_output.append(result.stdout)
            if args[0] == "test":
                self.test_runs.append(result.stderr)
        else:
            pytest.fail(f"{block}: the test does not know how to run {shlex.join(words)!r}")
        assert result.returncode == 0, (
            f"{block}: {shlex.join(words)} exited {result.returncode}:\n"
            f"{result.stdout}\n{result.stderr}"
        )

    def manage(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )

    def run_until_ready(self, args: list[str], block: Block) -> None:
        """A worker that runs until stopped: wait for ``worker ready``, then SIGTERM it."""
        self.workers += 1
        out = self.project.parent / f"worker-{self.workers}.out"
        err = self.project.parent / f"worker-{self.workers}.err"
        with out.open("w") as stdout, err.open("w") as stderr:
            worker = subprocess.Popen(
                [sys.executable, "manage.py", *args],
                cwd=self.project,
                env=self.env,
                stdout=stdout,
                stderr=stderr,
                text=True,
            )
            try:
                wait_until(
                    lambda: "worker ready" in err.read_text() or worker.poll() is not None,
                    timeout=COMMAND_TIMEOUT_S,
                )
                assert worker.poll() is None, f"{block}: {args} exited:\n{err.read_text()}"
                worker.send_signal(signal.SIGTERM)
                status = worker.wait(timeout=COMMAND_TIMEOUT_S)
            finally:
                if worker.poll() is None:
                    worker.kill()
                    worker.wait()
        assert status == 0, f"{block}: {args} exited {status} on SIGTERM:\n{err.read_text()}"
        self.worker_output.append(out.read_text())


def jobs(database: FreshDatabase) -> list[tuple[str, str, dict, int, list]]:
    """Every job of the page's database: kind, state, args, attempt, errors."""
    with psycopg.connect(database.conninfo()) as conn:
        return conn.execute(
            "SELECT kind, state, args, attempt, errors FROM awa.jobs ORDER BY job_id"
        ).fetchall()


def user_ids(database: FreshDatabase) -> dict[str, int]:
    with psycopg.connect(database.conninfo()) as conn:
        return dict(conn.execute("SELECT username, id FROM auth_user").fetchall())


def test_the_getting_started_page_runs_as_written(tmp_path):
    blocks = page_blocks()
    assert [b.lang for b in blocks].count("sh") >= 4 and len(blocks) >= 15, blocks
    project = tmp_path / "project"
    project.mkdir()
    with fresh_database("awa_docs") as database:
        page = PageRun(project, database, project_env(SETTINGS_MODULE, project, ROOT))
        for block in blocks:
            page.run(block)

        # Installation is by path, in the one form the page gives, and the database the page
        # creates is the one its settings name.
        assert page.pip_lines == [f"pip install {PIP_PATH}"]
        assert page.created_databases == ["mysite"]
        assert '"NAME": "mysite"' in PAGE.read_text()
        # The page's TestCase ran, and passed.
        assert len(page.test_runs) == 1 and "Ran 1 test" in page.test_runs[0]
        assert "\nOK\n" in page.test_runs[0]

        users = user_ids(database)
        found = jobs(database)
        states = Counter((kind, state) for kind, state, *_ in found)
        # Every welcome ran and sent its email, except the two scheduled ahead (ten minutes from
        # code, an hour from awa_enqueue), both ada's.
        assert states[("shop.send_welcome", "completed")] == 4
        scheduled = [args for kind, state, args, *_ in found if state == "scheduled"]
        assert scheduled == [{"user_id": users["ada"]}] * 2
        emails = "".join(page.worker_output)
        assert emails.count("Subject: Welcome") == 4
        for name in ("ada", "bob", "cy", "dee"):
            assert f"To: {name}@example.com" in emails and f"Hello {name}!" in emails
        # The three charges: completed, failed at once (a TerminalError), cancelled.
        charges = {
            (args["user_id"], args["amount_cents"]): (state, attempt, errors)
            for kind, state, args, attempt, errors in found
            if kind == "shop.charge"
        }
        assert charges[(users["ada"], 1250)][:2] == ("completed", 1)
        state, attempt, errors = charges[(users["ada"], 500_000)]
        assert (state, attempt) == ("failed", 1)
        assert errors[-1]["type"] == "shop.jobs.PaymentDeclined"
        state, _, errors = charges[(users["eve"], 1250)]
        assert state == "cancelled" and errors[-1]["reason"] == "the customer closed their account"
        assert len(charges) == 3
        # The catalog import on its own queue completed; the one cancelled before it ran did not.
        imports = {
            args["feed_id"]: state
            for kind, state, args, *_ in found
            if kind == "shop.import_catalog"
        }
        assert imports == {7: "completed", 8: "cancelled"}
        # Nothing else was enqueued, and nothing was left waiting, running or retrying.
        assert states == {
            ("shop.send_welcome", "completed"): 4,
            ("shop.send_welcome", "scheduled"): 2,
            ("shop.charge", "completed"): 1,
            ("shop.charge", "failed"): 1,
            ("shop.charge", "cancelled"): 1,
            ("shop.import_catalog", "completed"): 1,
            ("shop.import_catalog", "cancelled"): 1,
        }
