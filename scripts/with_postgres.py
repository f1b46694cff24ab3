#!/usr/bin/env python3
"""Run a command against a throwaway PostgreSQL cluster.

Usage::

    python3 scripts/with_postgres.py [--second] -- CMD [ARGS...]

If ``DATABASE_URL`` is already set, CMD runs unchanged against that database.
Otherwise a private cluster is created in a fresh temporary directory from the
PostgreSQL server binaries installed on the machine, listening on a free
loopback port, with a database ``awa`` owned by the trusted user ``postgres``. CMD
then runs with ``DATABASE_URL=postgres://postgres@127.0.0.1:PORT/awa`` in its
environment. Whatever happens to CMD (success, failure, SIGINT or SIGTERM),
the cluster is stopped and the temporary directory removed afterwards, and the
script exits with CMD's exit code.

``--second`` starts a second, independent cluster the same way and exports its URL as
``DATABASE_URL_2`` (unless ``DATABASE_URL_2`` is already set): the tests of queues living in
another database (a queue's ``database`` option) need two servers.

``WITH_POSTGRES_OPTIONS`` adds server options after the defaults (later ``-c`` settings win),
e.g. ``-c fsync=on -c synchronous_commit=on -c full_page_writes=on`` for a durable server in a
benchmark, or ``-c shared_preload_libraries=pg_stat_statements`` to profile one.

Only the standard library is used so that this works before any virtualenv
exists (``make test`` / ``make demo`` / CI call it with the system Python).
"""

from __future__ import annotations

import ctypes
import glob
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

PROG = "with_postgres"
# Not "awa": a role named like the schema would put "$user" (the default search_path) on it,
# and every unqualified table Django creates after our migration would land in schema awa.
DB_USER = "postgres"
DB_NAME = "awa"
# Durability is pointless for a cluster that is deleted afterwards; turning it
# off makes migrations and the test suite noticeably faster.
SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -p {port} -k {sockdir} "
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
    "-c max_connections=200"
)
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


def log(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def find_bindir() -> Path:
    """Locate a directory holding the server binaries (initdb, pg_ctl)."""
    candidates: list[Path] = []
    # pg_config knows where the matching server lives, but on Debian it comes
    # from libpq-dev and may point at a server that is not installed, so every
    # candidate is checked for initdb below.
    if shutil.which("pg_config"):
        result = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=False
        )
        if result.returncode == 0 and result.stdout.strip():
            candidates.append(Path(result.stdout.strip()))

    def version_key(path: str) -> tuple[int, ...]:
        name = Path(path).parent.name
        return tuple(int(part) for part in name.split(".") if part.isdigit())

    # Debian/Ubuntu keep several major versions side by side: prefer the newest.
    versioned = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += [Path(p) for p in sorted(versioned, key=version_key, reverse=True)]
    initdb_on_path = shutil.which("initdb")
    if initdb_on_path:
        # Resolve symlinks such as /usr/local/bin/initdb -> .../15/bin/initdb so
        # that pg_ctl and createdb come from the same installation.
        candidates.append(Path(initdb_on_path).resolve().parent)

    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    log("no PostgreSQL server binaries found (need initdb and pg_ctl);")
    log("install them, e.g. `apt-get install postgresql`, or set DATABASE_URL.")
    sys.exit(2)


def server_user() -> pwd.struct_passwd | None:
    """The OS user to run the server as, or None to run it as ourselves."""
    if os.geteuid() != 0:
        return None
    # PostgreSQL refuses to run as root, so drop to an unprivileged account.
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    log("running as root but neither a 'postgres' nor a 'nobody' user exists")
    sys.exit(2)


def as_user(user: pwd.struct_passwd | None, argv: list[str]) -> list[str]:
    """Wrap argv so that it runs as ``user`` (unchanged when user is None)."""
    if user is None:
        return argv
    if shutil.which("runuser"):
        return ["runuser", "-u", user.pw_name, "--", *argv]
    if shutil.which("setpriv"):
        return [
            "setpriv",
            f"--reuid={user.pw_uid}",
            f"--regid={user.pw_gid}",
            "--init-groups",
            "--",
            *argv,
        ]
    # su needs an explicit shell because system users often have nologin.
    return ["su", "-s", "/bin/sh", user.pw_name, "-c", shlex.join(argv)]


def make_tempdir(user: pwd.struct_passwd | None) -> Path:
    """Create the throwaway directory, usable by the server's OS user."""
    base = tempfile.gettempdir()
    if user is not None and not _world_traversable(Path(base)):
        # A TMPDIR under e.g. /root would be unreachable for the postgres user.
        base = "/tmp"
    tmp = Path(tempfile.mkdtemp(prefix="awa-pg-", dir=base))
    (tmp / "sock").mkdir()
    if user is not None:
        # mkdtemp gives 0700; the server user must be able to enter it.
        tmp.chmod(0o755)
        for path in (tmp, tmp / "sock"):
            os.chown(path, user.pw_uid, user.pw_gid)
    return tmp


def _world_traversable(path: Path) -> bool:
    path = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in (path, *path.parents))


def free_port() -> int:
    # Binding to port 0 lets the kernel choose a free port. There is a small
    # window before postgres binds it, which is acceptable for dev/CI use.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_quiet(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a setup step, keeping its chatter unless it fails."""
    # cwd is the temp dir because postgres tools fail when the current
    # directory is unreadable for the (possibly different) OS user.
    return subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False
    )


class Cluster:
    """A private PostgreSQL cluster living in one temporary directory."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.user = server_user()
        self.port = free_port()
        self.tmp = make_tempdir(self.user)
        self.data = self.tmp / "data"
        self.logfile = self.tmp / "postgres.log"
        self.started = False

    @property
    def url(self) -> str:
        return f"postgres://{DB_USER}@127.0.0.1:{self.port}/{DB_NAME}"

    def _fail(self, what: str, result: subprocess.CompletedProcess[str]) -> None:
        log(f"{what} failed (exit {result.returncode})")
        output = (result.stdout + result.stderr).strip()
        if output:
            print(output, file=sys.stderr)
        if self.logfile.exists():
            tail = self.logfile.read_text(errors="replace").splitlines()[-30:]
            log(f"last lines of {self.logfile}:")
            print("\n".join(tail), file=sys.stderr)
        raise SystemExit(1)

    def start(self) -> None:
        bin_ = self.bindir
        initdb = [
            str(bin_ / "initdb"),
            "-D",
            str(self.data),
            "--auth=trust",
            f"--username={DB_USER}",
            "-E",
            "UTF8",
            # The C locale always exists, unlike whatever LANG happens to say.
            "--locale=C",
            "--no-sync",
        ]
        result = run_quiet(as_user(self.user, initdb), self.tmp)
        if result.returncode != 0:
            self._fail("initdb", result)

        options = SERVER_OPTIONS.format(port=self.port, sockdir=self.tmp / "sock")
        extra = os.environ.get("WITH_POSTGRES_OPTIONS", "").strip()
        if extra:
            options = f"{options} {extra}"
        pg_ctl = [str(bin_ / "pg_ctl"), "-w", "-t", "60", "-D", str(self.data)]
        start = [*pg_ctl, "-l", str(self.logfile), "-o", options, "start"]
        # Mark as started first: a half-started server must still be stopped.
        self.started = True
        result = run_quiet(as_user(self.user, start), self.tmp)
        if result.returncode != 0:
            self._fail("pg_ctl start", result)

        createdb = bin_ / "createdb"
        createdb_cmd = str(createdb) if createdb.is_file() else "createdb"
        result = run_quiet(
            [createdb_cmd, "-h", "127.0.0.1", "-p", str(self.port), "-U", DB_USER, DB_NAME],
            self.tmp,
        )
        if result.returncode != 0:
            self._fail("createdb", result)

    def stop(self) -> None:
        pidfile = self.data / "postmaster.pid"
        if self.started and pidfile.exists():
            postmaster_pid = int(pidfile.read_text().split("\n", 1)[0])
            pg_ctl = [str(self.bindir / "pg_ctl"), "-w", "-t", "30", "-D", str(self.data)]
            result = run_quiet(as_user(self.user, [*pg_ctl, "-m", "fast", "stop"]), self.tmp)
            if result.returncode != 0:
                # Never leave a server behind, even if a fast shutdown hangs.
                run_quiet(as_user(self.user, [*pg_ctl, "-m", "immediate", "stop"]), self.tmp)
            reap(postmaster_pid)
        shutil.rmtree(self.tmp, ignore_errors=True)


def become_subreaper() -> None:
    """Adopt orphaned descendants so that the stopped server can be reaped here.

    pg_ctl starts the server as a daemon: when pg_ctl exits, the server is
    re-parented, normally to init, which may reap it only a while after it
    stops, leaving a ``<defunct>`` postgres process behind for a moment.
    """
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # Not fatal: init reaps the server instead.


def reap(pid: int, timeout: float = 10.0) -> None:
    """Wait for the adopted postmaster to exit, if it is our child."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return  # Not adopted by us (no subreaper support).
        if done:
            return
        time.sleep(0.05)


def exit_code(returncode: int) -> int:
    # A child killed by signal N reports -N; shells report that as 128+N.
    return 128 - returncode if returncode < 0 else returncode


def run_child(cmd: list[str], env: dict[str, str]) -> int:
    """Run CMD, forwarding termination signals to it, and return its exit code."""
    try:
        child = subprocess.Popen(cmd, env=env)
    except OSError as exc:
        log(f"cannot run {cmd[0]!r}: {exc}")
        return 127

    def forward(signum: int, _frame: types.FrameType | None) -> None:
        # Ctrl-C in a terminal already reaches the child, which shares our
        # foreground process group; sending it again could interrupt the
        # child's own clean-up, so only forward signals aimed at us alone.
        if signum == signal.SIGINT and _in_terminal_foreground():
            return
        if child.poll() is None:
            child.send_signal(signum)

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    return exit_code(child.wait())


def _in_terminal_foreground() -> bool:
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False


def main(argv: list[str]) -> int:
    second = bool(argv) and argv[0] == "--second"
    if second:
        argv = argv[1:]
    if len(argv) < 2 or argv[0] != "--":
        print(f"usage: {Path(sys.argv[0]).name} [--second] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    cmd = argv[1:]
    # Which URLs to provide: someone may already name either server.
    wanted = [
        name
        for name, needed in (("DATABASE_URL", True), ("DATABASE_URL_2", second))
        if needed and not os.environ.get(name)
    ]

    if not wanted:
        # Someone already provides the databases: just become CMD.
        try:
            os.execvp(cmd[0], cmd)
        except OSError as exc:
            log(f"cannot run {cmd[0]!r}: {exc}")
            return 127

    # Setup takes about a second. A signal arriving meanwhile is only noted
    # and acted upon once setup is over: interrupting pg_ctl half-way could
    # leave a server starting up that nobody knows about.
    pending: list[int] = []
    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, lambda signum, _frame: pending.append(signum))
    become_subreaper()
    clusters: list[Cluster] = []
    env = dict(os.environ)
    try:
        for name in wanted:
            cluster = Cluster()
            clusters.append(cluster)
            cluster.start()
            env[name] = cluster.url
            log(
                f"PostgreSQL running at {cluster.url} as {name} "
                f"(binaries {cluster.bindir}, data {cluster.data})"
            )
        if pending:
            log(f"got signal {pending[0]} during setup; not running CMD")
            return 128 + pending[0]
        return run_child(cmd, env)
    finally:
        # Ignore further signals so that clean-up itself is not interrupted.
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        for cluster in clusters:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
