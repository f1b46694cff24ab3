"""A real PgBouncer (Debian's ``pgbouncer`` package) in transaction pooling mode, in front of
the test server: a generated ini in a private directory, a free loopback port, and, when the
tests run as root (CI), ``-u nobody``, since PgBouncer refuses to run as root."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

BINARY_CANDIDATES = ("pgbouncer", "/usr/sbin/pgbouncer")


def find_binary() -> str:
    for candidate in BINARY_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    raise AssertionError(
        "pgbouncer is not installed: apt-get install -y --no-install-recommends pgbouncer "
        "(make test installs it when missing, as root: scripts/ensure_test_tools.sh)"
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgBouncer:
    """One PgBouncer process; ``url(dbname)`` is a DSN through it for ``user``."""

    def __init__(self, *, server_host: str, server_port: int, user: str) -> None:
        self.user = user
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="awa-pgbouncer-"))
        # The process may run as nobody: it must read the ini and write its log here.
        self.dir.chmod(0o777)
        (self.dir / "users.txt").write_text(f'"{user}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(
            "\n".join(
                [
                    "[databases]",
                    f"* = host={server_host} port={server_port}",
                    "[pgbouncer]",
                    "listen_addr = 127.0.0.1",
                    f"listen_port = {self.port}",
                    "unix_socket_dir =",
                    "auth_type = trust",
                    f"auth_file = {self.dir / 'users.txt'}",
                    "pool_mode = transaction",
                    "default_pool_size = 10",
                    "max_client_conn = 200",
                    # psycopg and the awa worker send these; PgBouncer 1.18 rejects unknown ones.
                    "ignore_startup_parameters = extra_float_digits,options",
                    f"logfile = {self.dir / 'pgbouncer.log'}",
                    "",
                ]
            )
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, dbname: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{dbname}"

    def start(self, timeout: float = 15.0) -> PgBouncer:
        command = [find_binary()]
        if os.geteuid() == 0:
            command += ["-u", "nobody"]
        command.append(str(self.dir / "pgbouncer.ini"))
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"pgbouncer exited at start:\n{self.log()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"pgbouncer did not listen within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)
        shutil.rmtree(self.dir, ignore_errors=True)
