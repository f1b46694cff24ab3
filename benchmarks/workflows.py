"""Workflows (docs/workflows.md): how fast their steps run, how soon a fan-in starts after its
last dependency, and what the workflow check costs the close of ordinary jobs.

Usage (a throwaway cluster, as the other harnesses; needs a quiet machine)::

    python3 scripts/with_postgres.py -- .venv/bin/python -m benchmarks.workflows \
        [--chains 1000] [--chain-length 10] [--chords 5] [--chord-size 10000] \
        [--groups 1000] [--group-size 10] [--drain 20000] [--drain-reps 5] \
        [--concurrency 16] [--close-reps 300] [--output PATH]

Measurements, each on an emptied queue with one real ``awa_worker`` process (``bench=N``):

- **chains**: ``--chains`` chains of ``--chain-length`` no-op steps, enqueued in one
  transaction; wall time until every workflow has finished, and steps per second.
- **chord latency**: ``--chords`` chords of ``--chord-size`` members, one after another; for
  each, the time from the start of the transaction that completed its last member to the
  callback's claim (both on the server's clock), p50 and p99 over the chords, and the wall time.
- **groups with a chord**: ``--groups`` chords of ``--group-size`` members; wall time.
- **drain**: ``--drain`` plain jobs, then one group of ``--drain`` steps, for ``--drain-reps``
  rounds on the same worker and database (interleaved, so that a change of the machine's load
  falls on both sides); jobs per second of each and their ratio per round, and the median
  ratio with the rounds' range. The peers run one round.
- **close**: the server-side time (``EXPLAIN ANALYZE``) of ``awa.close_batch`` closing 1 and 100
  ordinary attempts, against the definition migration 0012 left (from 0013's ``down.sql``,
  created under another name for the run), rolled back so the same attempts close again;
  medians of ``--close-reps`` runs, interleaved.

Then the same workloads on the peers (``--peers celery,chancy``, the default; ``--peers ''``
for none), each in its own virtual environment, ``.venv-peers/<peer>``, made and filled with
pip on first use (a peer that cannot be installed, or whose service is missing, is skipped
with the reason, in the output and the results file):

- **Celery** (``benchmarks/workflow_peers/celery_canvas.py``): its canvas (``chain``,
  ``chord``, ``group``) on a Redis broker and result backend, served by Debian's
  ``redis-server`` (found on the PATH or in /usr/bin, /usr/sbin; installed with ``apt-get``
  when missing and this runs as root or with passwordless sudo) on a free port with
  persistence off, and one ``celery worker`` process of ``--concurrency`` prefork children.
  The chord gap is from the last member's body ending to the callback's body starting
  (Celery's own accounting of a member comes after its body).
- **Chancy** (``benchmarks/workflow_peers/chancy_flows.py``): its ``WorkflowPlugin`` in this
  run's database (its own ``chancy_*`` tables), one process holding the driver and a Chancy
  ``Worker`` of ``--concurrency`` async jobs on queue ``bench`` (polling every second, eager
  polling on). Its workflows advance on the leader only: a warm-up workflow waits for the
  worker to win the leadership first (about a minute), reported apart, not counted.

Writes every sample and the environment to ``benchmarks/results/workflows-<UTC time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import close_timing
from benchmarks.close_timing import percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
PEERS_DIR = Path(__file__).resolve().parent / "workflow_peers"
# Each peer's own virtual environment (``.venv*`` is ignored by git) and what pip puts in it.
PEER_VENVS = ROOT / ".venv-peers"
PEER_PACKAGES = {"celery": ["celery[redis]>=5.3"], "chancy": ["chancy>=0.26"]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chains", type=int, default=1000)
    parser.add_argument("--chain-length", type=int, default=10)
    parser.add_argument("--chords", type=int, default=5)
    parser.add_argument("--chord-size", type=int, default=10000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--group-size", type=int, default=10)
    parser.add_argument("--drain", type=int, default=20000)
    parser.add_argument("--drain-reps", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--close-reps", type=int, default=300)
    parser.add_argument("--peers", default="celery,chancy", help="comma-separated; '' for none")
    parser.add_argument("--output", type=Path)
    return parser.parse_args(argv)


def start_worker(concurrency: int) -> subprocess.Popen[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchmarks.settings", "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "manage.py", "awa_worker", "--queue", f"bench={concurrency}", "-v", "1"]
    proc = subprocess.Popen(
        argv, cwd=Path(__file__).resolve().parent.parent, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if "worker ready" in line:
            return proc
    raise RuntimeError(f"the worker exited ({proc.wait()}) before it was ready")


def scalar(sql: str, params: list[Any] | None = None) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def until(predicate_sql: str, timeout_s: float = 3600.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not scalar(predicate_sql):
        if time.monotonic() > deadline:
            raise TimeoutError(predicate_sql)
        time.sleep(0.01)


ALL_FINISHED = "SELECT NOT EXISTS (SELECT 1 FROM awa.workflows WHERE state = 'running')"


def with_worker(concurrency: int, body: Any) -> Any:
    from awa_django.testing import reset_queue

    reset_queue()
    worker = start_worker(concurrency)
    try:
        return body()
    finally:
        worker.terminate()
        worker.wait(60)


def step() -> Any:
    import awa_django as awa
    from benchmarks.jobs import SYNC_KIND

    return awa.call(SYNC_KIND, n=0, payload="")


def run_chains(count: int, length: int) -> dict[str, float]:
    from django.db import transaction

    import awa_django as awa

    started = time.perf_counter()
    with transaction.atomic():
        for _ in range(count):
            awa.chain(*(step() for _ in range(length))).enqueue()
    until(ALL_FINISHED)
    wall = time.perf_counter() - started
    return {"wall_s": wall, "steps_per_s": count * length / wall}


def run_chords(count: int, size: int) -> dict[str, Any]:
    import awa_django as awa

    gaps_ms: list[float] = []
    started = time.perf_counter()
    for _ in range(count):
        run = awa.chord([step() for _ in range(size)], step()).enqueue()
        until(ALL_FINISHED)
        gap = scalar(
            "SELECT extract(epoch FROM (SELECT c.claimed_at FROM awa.claim_receipts c "
            "WHERE c.job_id = %s ORDER BY c.run_lease LIMIT 1) - (SELECT max(s.finished_at) "
            "FROM awa.workflow_steps s WHERE s.workflow_id = %s AND s.name <> 'callback'))",
            [run.job_ids["callback"], run.workflow_id],
        )
        gaps_ms.append(float(gap) * 1000)
    return {
        "wall_s": time.perf_counter() - started,
        "callback_gap_ms": gaps_ms,
        "p50_ms": percentile(gaps_ms, 0.5),
        "p99_ms": percentile(gaps_ms, 0.99),
    }


def run_groups(count: int, size: int) -> dict[str, float]:
    from django.db import transaction

    import awa_django as awa

    started = time.perf_counter()
    with transaction.atomic():
        for _ in range(count):
            awa.chord([step() for _ in range(size)], step()).enqueue()
    until(ALL_FINISHED)
    return {"wall_s": time.perf_counter() - started}


def run_drain(count: int, reps: int) -> dict[str, Any]:
    """``reps`` rounds, each ``count`` plain jobs then a group of ``count`` steps, on the same
    worker and database: one pair drifts with the machine's load, so the ratio is the median
    of the rounds', with their range."""
    import awa_django as awa
    from benchmarks.jobs import SYNC_KIND

    rounds: list[dict[str, float]] = []
    for _ in range(reps):
        started = time.perf_counter()
        ids = awa.enqueue_many(SYNC_KIND, [{"n": n, "payload": ""} for n in range(count)])
        # This round's jobs only, by their id range: the rounds before left their done rows.
        until(
            f"SELECT count(*) >= {count:d} FROM awa.done_entries "
            f"WHERE job_id BETWEEN {min(ids):d} AND {max(ids):d}"
        )
        plain = count / (time.perf_counter() - started)
        started = time.perf_counter()
        awa.group(*(step() for _ in range(count))).enqueue()
        until(ALL_FINISHED)
        steps = count / (time.perf_counter() - started)
        rounds.append({"plain_jobs_per_s": plain, "steps_per_s": steps, "ratio": steps / plain})
    ratios = [r["ratio"] for r in rounds]
    return {
        "rounds": rounds,
        "plain_jobs_per_s": statistics.median(r["plain_jobs_per_s"] for r in rounds),
        "steps_per_s": statistics.median(r["steps_per_s"] for r in rounds),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }


def measure_close(reps: int) -> dict[str, dict[str, list[float]]]:
    return close_timing.measure_close(
        reps, migration="0013_workflows", previous_label="0012 (no workflow check)"
    )


def peer_python(peer: str) -> tuple[Path | None, str]:
    """The Python of ``peer``'s virtual environment, made and filled on first use; or None and
    why it could not be."""
    venv = PEER_VENVS / peer
    python = venv / "bin" / "python"
    if python.exists():
        return python, ""
    packages = PEER_PACKAGES[peer]
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *packages],
            check=True, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(venv, ignore_errors=True)
        detail = getattr(exc, "stderr", None) or exc
        return None, f"pip could not install {' '.join(packages)}: {str(detail).strip()[-300:]}"
    return python, ""


def find_redis_server() -> str | None:
    """Debian's redis-server: on the PATH, or where the package puts it."""
    found = shutil.which("redis-server")
    if found:
        return found
    for path in ("/usr/bin/redis-server", "/usr/sbin/redis-server"):
        if os.access(path, os.X_OK):
            return path
    return None


def install_redis_server() -> str | None:
    """Debian's redis-server through apt-get, as root or with passwordless sudo, the way
    `make test` brings its tools (scripts/ensure_test_tools.sh); None where it cannot."""
    apt = shutil.which("apt-get")
    if apt is None:
        return None
    if os.geteuid() == 0:
        as_root: list[str] = []
    elif (
        shutil.which("sudo")
        and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0
    ):
        as_root = ["sudo", "-n", "env", "DEBIAN_FRONTEND=noninteractive"]
    else:
        return None
    print("celery: installing Debian's redis-server with apt-get", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        [apt, "update"],
        [apt, "install", "-y", "--no-install-recommends", "redis-server"],
    ):
        done = subprocess.run([*as_root, *command], env=env, capture_output=True, timeout=900)
        if done.returncode != 0:
            return None
    return find_redis_server()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_celery(args: argparse.Namespace) -> dict[str, Any]:
    """The workloads on Celery's canvas (workflow_peers/celery_canvas.py), with its own Redis;
    ``{"skipped": why}`` when Redis or Celery is missing or the run fails."""
    server = find_redis_server() or install_redis_server()
    if server is None:
        return {
            "skipped": "Debian's redis-server is not installed and could not be "
            "(apt-get install redis-server, as root)"
        }
    python, why = peer_python("celery")
    if python is None:
        return {"skipped": why}
    port = free_port()
    redis = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or redis.poll() is not None:
                    return {"skipped": f"{server} did not start"}
                time.sleep(0.05)
        return run_peer(
            "Celery", python, "celery_canvas.py", args,
            {"BENCH_REDIS_URL": f"redis://127.0.0.1:{port}/0"},
        )  # fmt: skip
    finally:
        redis.terminate()
        redis.wait(30)


def run_peer(
    who: str, python: Path, script: str, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    """Run a peer's script with the workload sizes; its results, or why it failed."""
    argv = [str(python), script]
    for name in ("chains", "chain_length", "chords", "chord_size", "groups", "group_size",
                 "drain", "concurrency"):  # fmt: skip
        argv += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    done = subprocess.run(
        argv, cwd=PEERS_DIR, capture_output=True, text=True, env={**os.environ, **env}
    )
    if done.returncode != 0:
        return {"skipped": f"the {who} run failed: {done.stderr.strip()[-500:]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_chancy(args: argparse.Namespace) -> dict[str, Any]:
    """The workloads on Chancy's WorkflowPlugin (workflow_peers/chancy_flows.py), in this run's
    database (Chancy keeps its own tables); ``{"skipped": why}`` when it cannot run."""
    python, why = peer_python("chancy")
    if python is None:
        return {"skipped": why}
    from django.db import connection

    settings = connection.settings_dict
    url = os.environ.get("DATABASE_URL") or (
        f"postgresql://{settings['USER']}:{settings['PASSWORD']}@{settings['HOST']}:"
        f"{settings['PORT']}/{settings['NAME']}"
    )
    return run_peer("Chancy", python, "chancy_flows.py", args, {"DATABASE_URL": url})


def print_results(who: str, results: dict[str, Any], args: argparse.Namespace) -> None:
    chains, chords = results["chains"], results["chords"]
    groups, drain = results["groups"], results["drain"]
    print(
        f"{who}: {args.chains} chains of {args.chain_length}: {chains['wall_s']:.2f} s, "
        f"{chains['steps_per_s']:.0f} steps/s"
    )
    print(
        f"{who}: {args.chords} chords of {args.chord_size}: callback starts "
        f"p50 {chords['p50_ms']:.1f} ms, p99 {chords['p99_ms']:.1f} ms after the last member"
    )
    print(
        f"{who}: {args.groups} groups of {args.group_size} with a chord each: "
        f"{groups['wall_s']:.2f} s"
    )
    for number, each in enumerate(drain.get("rounds", []), start=1):
        print(
            f"{who}: drain round {number}: plain {each['plain_jobs_per_s']:.0f} jobs/s, "
            f"steps {each['steps_per_s']:.0f}/s (ratio {each['ratio']:.2f})"
        )
    spread = (
        f", rounds {drain['ratio_min']:.2f}-{drain['ratio_max']:.2f}" if "rounds" in drain else ""
    )
    print(
        f"{who}: drain of {args.drain}: plain {drain['plain_jobs_per_s']:.0f} jobs/s, "
        f"steps {drain['steps_per_s']:.0f}/s (ratio {drain['ratio']:.2f}{spread})"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks import environment

    call_command("migrate", verbosity=0, interactive=False)
    env = environment.collect()
    results: dict[str, Any] = {}
    concurrency = args.concurrency
    results["chains"] = with_worker(concurrency, lambda: run_chains(args.chains, args.chain_length))
    results["chords"] = with_worker(concurrency, lambda: run_chords(args.chords, args.chord_size))
    results["groups"] = with_worker(concurrency, lambda: run_groups(args.groups, args.group_size))
    results["drain"] = with_worker(concurrency, lambda: run_drain(args.drain, args.drain_reps))
    print_results("awa_django", results, args)
    results["close_execution_ms"] = measure_close(args.close_reps)
    for size, variants in results["close_execution_ms"].items():
        medians = ", ".join(
            f"{name} {statistics.median(values) * 1000:.0f} µs" for name, values in variants.items()
        )
        print(f"close statement, {size}: median {medians}")
    peers: dict[str, Any] = {}
    for peer in filter(None, args.peers.split(",")):
        if peer == "celery":
            peers[peer] = run_celery(args)
        elif peer == "chancy":
            peers[peer] = run_chancy(args)
        else:
            peers[peer] = {"skipped": "unknown peer (celery, chancy)"}
        if "skipped" in peers[peer]:
            print(f"{peer}: skipped, {peers[peer]['skipped']}")
        else:
            print_results(peer, peers[peer], args)
    results["peers"] = peers
    env["machine"]["loadavg_at_end"] = list(os.getloadavg())
    output = args.output or RESULTS_DIR / (
        f"workflows-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {"environment": env, "parameters": vars(args) | {"output": str(output)}, **results},
            indent=2,
            default=str,
        )
    )
    print(f"results: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
