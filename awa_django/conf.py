"""The only reader of ``settings.AWA``: typed, validated settings with one set of defaults.

``get_settings()`` builds a frozen ``AwaSettings`` once and caches it; a ``setting_changed``
receiver (``reset_settings_cache``, connected as this module is imported, before any settings
are cached) clears the cache so ``override_settings`` works. ``problems()``
returns every invalid value with its ``awa.E0xx`` id: system checks report them, and
``get_settings()`` raises ``ConfigError`` on the first one so nothing runs on bad settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any, Final

from django.conf import settings
from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver

from awa_django.exceptions import ConfigError

PRIORITY_MIN: Final = 1
PRIORITY_MAX: Final = 4
MAX_ATTEMPTS_LIMIT: Final = 1000
QUEUE_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
# Shortest CALLBACK_SECRET accepted: 32 characters, e.g. 16 random bytes as hex.
MIN_CALLBACK_SECRET_LENGTH: Final = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSettings:
    """Per-queue options from ``AWA["QUEUES"][name]``."""

    name: str
    # Jobs of this queue one worker process runs at once (hard-reserved permits).
    concurrency: int = 10
    # Longest one attempt may run before its worker stops it (worker.deadline); 0: no limit,
    # as in Celery, so that a long job is never stopped by a default it did not choose.
    deadline_s: float = 0.0
    # A waiting job gains one priority step per this many seconds at claim time; 0 disables.
    aging_interval_s: float = 60.0
    # Token bucket (jobs per second, burst) applied before claims; None: unlimited.
    rate_limit: tuple[float, int] | None = None
    # "process": each worker process has its own bucket; "fleet": one budget for every worker,
    # kept in PostgreSQL (docs/scheduling.md).
    rate_limit_scope: str = "process"
    # Weighted mode (AWA["WORKER_CONCURRENCY"] set): permits kept for this queue whenever it has
    # work, and its share of the capacity other queues leave idle.
    min_concurrency: int = 0
    weight: int = 1
    # Each (priority, shard) lane runs one job at a time across the fleet, so jobs sharing an
    # ordering key finish in enqueue order (docs/scheduling.md).
    sequential_lanes: bool = False
    # Terminal failures go to the dead-letter queue (awa.dlq) instead of failed history.
    dlq: bool = False
    # Descriptor shown to operators (admin, awa_queues); empty when not declared.
    display_name: str = ""
    description: str = ""
    owner: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaSettings:
    """Every ``AWA`` key with its default. Units are in the names."""

    # Django database alias that holds the awa schema; enqueue runs on this connection.
    DATABASE_ALIAS: str = "default"
    # Declared queues; enqueue rejects any other name.
    QUEUES: Mapping[str, QueueSettings] = field(
        default_factory=lambda: MappingProxyType({"default": QueueSettings(name="default")})
    )
    # Queue used when neither the job nor the enqueue call names one.
    DEFAULT_QUEUE: str = "default"
    # 1 (most urgent) .. 4.
    DEFAULT_PRIORITY: int = 2
    # Attempts before a failing job ends as failed (1 .. 1000).
    DEFAULT_MAX_ATTEMPTS: int = 25
    # Modules the worker imports to register handlers, besides every installed app's ``jobs``.
    JOB_MODULES: tuple[str, ...] = ()
    # Poll fallback when no NOTIFY arrives.
    POLL_INTERVAL_S: float = 1.0
    # How often the maintenance leader moves due scheduled/retryable jobs into the ready ring.
    PROMOTE_INTERVAL_S: float = 1.0
    # Most deferred jobs moved per promotion statement.
    PROMOTE_BATCH_SIZE: int = 1000
    # Most jobs one claim statement takes for one queue.
    CLAIM_BATCH_SIZE: int = 100
    # Most completions written by one statement.
    COMPLETION_BATCH_SIZE: int = 500
    # Longest a finished job's result waits before its batch is written.
    COMPLETION_FLUSH_S: float = 0.002
    # Retry backoff: min(BASE * 2**(attempt-1), MAX), then up to JITTER * that added at random.
    RETRY_BACKOFF_BASE_S: float = 1.0
    RETRY_BACKOFF_MAX_S: float = 86400.0
    RETRY_JITTER: float = 0.25
    # A job whose kind no worker that claimed it has a handler for runs again later without
    # using an attempt, until this long after the first such try; then it fails. 0: at once.
    UNKNOWN_KIND_TIMEOUT_S: float = 3600.0
    # Kinds this process may enqueue without a handler of its own (another service's workers
    # run them): exact kinds, or prefixes ending in "*" ("billing.*"; "*" for every kind).
    EXTERNAL_KINDS: tuple[str, ...] = ()
    # How long a stopping worker lets in-flight jobs finish.
    SHUTDOWN_TIMEOUT_S: float = 30.0
    # A worker heartbeats (and flushes progress of) its attempts older than this, this often.
    HEARTBEAT_INTERVAL_S: float = 30.0
    # An attempt silent for this long is rescued; keep it at least 3 heartbeat intervals.
    HEARTBEAT_STALENESS_S: float = 90.0
    # How often the leader looks for stale or overdue attempts to rescue.
    RESCUE_INTERVAL_S: float = 5.0
    # Most attempts one rescue pass closes.
    RESCUE_BATCH_SIZE: int = 500
    # How often the leader checks its lock (a non-leader tries to become leader every two).
    LEADER_ELECTION_INTERVAL_S: float = 2.0
    # How often the leader tries to rotate and to prune each ring.
    RING_INTERVAL_S: float = 1.0
    # Longest a prune waits for the locks on a slot before skipping it this time.
    RING_LOCK_TIMEOUT_MS: int = 50
    # Completed history is kept at least this long before its ring slot may be truncated: a
    # day, as Celery keeps results (docs/operations.md says what it costs).
    COMPLETED_RETENTION_S: float = 86400.0
    # Failed and cancelled history is kept at least this long (carried across prunes).
    FAILED_RETENTION_S: float = 259200.0
    # Dead-letter entries older than this are deleted by the leader.
    DLQ_RETENTION_S: float = 2592000.0
    # How often the leader runs retention cleanup, and the most rows one statement deletes.
    CLEANUP_INTERVAL_S: float = 60.0
    CLEANUP_BATCH_SIZE: int = 1000
    # How often the leader measures queue depth and lag for the OpenTelemetry gauges.
    QUEUE_STATS_INTERVAL_S: float = 30.0
    # "per_job": one INFO line per finished attempt. "summary": those lines at DEBUG, and one
    # INFO line per queue every JOB_LOG_SUMMARY_INTERVAL_S with its counts by outcome.
    JOB_LOG: str = "per_job"
    JOB_LOG_SUMMARY_INTERVAL_S: float = 60.0
    # Most lines about failed attempts (retried, failed, dead-lettered) one process logs per job
    # kind per second; the others are counted, and the count logged in one line.
    JOB_LOG_FAILURES_PER_S: int = 10
    # Shared secret that signs HTTP callbacks (HMAC-SHA256, docs/callbacks.md); "" leaves the
    # callback endpoint refusing every request unless CALLBACK_ALLOW_UNSIGNED.
    CALLBACK_SECRET: str = ""
    # Serve the callback endpoint without signatures when no secret is set (development only).
    CALLBACK_ALLOW_UNSIGNED: bool = False
    # A signed callback is accepted this long after (or before) its timestamp.
    CALLBACK_MAX_AGE_S: float = 300.0
    # Largest callback request body the endpoint reads (larger ones get 413).
    CALLBACK_MAX_BODY_BYTES: int = 65536
    # Scheme and host awa.callback_url() puts before the endpoint's path ("" : path only).
    CALLBACK_BASE_URL: str = ""
    # Periodic schedules declared in settings (docs/scheduling.md), besides @awa.periodic ones.
    CRON: tuple[Mapping[str, Any], ...] = ()
    # How often the leader evaluates cron schedules; the finest useful tick spacing.
    CRON_INTERVAL_S: float = 1.0
    # Most missed ticks one catch_up schedule replays after an outage; older ones are skipped.
    CRON_MAX_CATCH_UP: int = 100
    # None: every queue has its own hard-reserved concurrency. An integer: weighted mode, one
    # limit for the whole worker process shared by its queues (min_concurrency, weight).
    WORKER_CONCURRENCY: int | None = None
    # How often each worker writes its runtime snapshot and refreshes its descriptors.
    RUNTIME_SNAPSHOT_INTERVAL_S: float = 10.0
    # A runtime silent this long is not live (the leader deletes its row), and a descriptor no
    # live runtime refreshed for this long is stale.
    RUNTIME_STALE_AFTER_S: float = 60.0
    # Run each job in-process when its enqueueing transaction commits, instead of in a worker
    # (tests and simple dev setups; docs/testing.md#eager-mode).
    EAGER: bool = False
    # Eager mode: re-raise a job's exception from the commit once the job has failed for good.
    EAGER_RAISE: bool = False
    # Where workers connect (a DATABASES alias or a libpq DSN), when DATABASE_ALIAS goes through
    # a transaction pooler: workers need a session for LISTEN and the leader lock. None: the
    # DATABASE_ALIAS connection.
    WORKER_DATABASE: str | None = None
    # False: workers and awa_maintenance hold no session connection, so that they may reach the
    # database through a transaction pooler: no LISTEN (dispatchers poll every POLL_INTERVAL_S),
    # no wake locks, and a leader lease row instead of the session advisory lock
    # (docs/deployment.md, "Scaling"). Every process of one fleet must use the same value.
    WORKER_SESSION: bool = True
    # Connections of a worker process's pool, which every claim, completion, heartbeat and
    # maintenance pass uses: a process holds this many plus its session connection. With 1 a
    # claim waits for a completion to be written and the drain is slower (docs/deployment.md,
    # "Scaling"); 2 lets them overlap.
    WORKER_POOL_SIZE: int = 2
    # Longest one database statement of an admin page may run before PostgreSQL cancels it
    # (statement_timeout): the page then says so, and an abandoned request leaves no query
    # running.
    ADMIN_STATEMENT_TIMEOUT_MS: int = 10_000

    @property
    def dlq_queues(self) -> frozenset[str]:
        """The queues whose terminal failures go to the dead-letter queue."""
        return frozenset(name for name, queue in self.QUEUES.items() if queue.dlq)


@dataclass(frozen=True, slots=True)
class Problem:
    """One invalid setting: a stable check id and a message that says what and how to fix."""

    id: str
    message: str


_QUEUE_OPTIONS: Final = frozenset(
    {
        "concurrency",
        "deadline_s",
        "dlq",
        "display_name",
        "description",
        "owner",
        "aging_interval_s",
        "rate_limit",
        "rate_limit_scope",
        "min_concurrency",
        "weight",
        "sequential_lanes",
    }
)
_QUEUE_TEXT_OPTIONS: Final = ("display_name", "description", "owner")
RATE_LIMIT_SCOPES: Final = ("process", "fleet")
JOB_LOG_MODES: Final = ("per_job", "summary")
_POSITIVE_NUMBERS: Final = (
    "POLL_INTERVAL_S",
    "PROMOTE_INTERVAL_S",
    "COMPLETION_FLUSH_S",
    "RETRY_BACKOFF_BASE_S",
    "RETRY_BACKOFF_MAX_S",
    "SHUTDOWN_TIMEOUT_S",
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_STALENESS_S",
    "RESCUE_INTERVAL_S",
    "LEADER_ELECTION_INTERVAL_S",
    "RING_INTERVAL_S",
    "CLEANUP_INTERVAL_S",
    "QUEUE_STATS_INTERVAL_S",
    "CRON_INTERVAL_S",
    "JOB_LOG_SUMMARY_INTERVAL_S",
)
_NON_NEGATIVE_NUMBERS: Final = (
    "COMPLETED_RETENTION_S",
    "FAILED_RETENTION_S",
    "DLQ_RETENTION_S",
    "UNKNOWN_KIND_TIMEOUT_S",
)
_POSITIVE_INTEGERS: Final = (
    "PROMOTE_BATCH_SIZE",
    "CLAIM_BATCH_SIZE",
    "COMPLETION_BATCH_SIZE",
    "RESCUE_BATCH_SIZE",
    "RING_LOCK_TIMEOUT_MS",
    "CLEANUP_BATCH_SIZE",
    "CRON_MAX_CATCH_UP",
    "JOB_LOG_FAILURES_PER_S",
    "WORKER_POOL_SIZE",
)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _queue_problems(raw_queues: object) -> list[Problem]:
    if not isinstance(raw_queues, Mapping) or not raw_queues:
        return [
            Problem("awa.E005", "AWA['QUEUES'] must be a non-empty dict of queue name to options.")
        ]
    found: list[Problem] = []
    for name, options in raw_queues.items():
        if not isinstance(name, str) or not QUEUE_NAME_PATTERN.match(name):
            found.append(
                Problem(
                    "awa.E005",
                    f"Queue name {name!r} is invalid: use 1-100 letters, digits, '_', '.', ':' "
                    "or '-', starting with a letter or digit.",
                )
            )
            continue
        if not isinstance(options, Mapping):
            found.append(Problem("awa.E006", f"AWA['QUEUES'][{name!r}] must be a dict of options."))
            continue
        unknown = sorted(set(options) - _QUEUE_OPTIONS)
        if unknown:
            found.append(
                Problem(
                    "awa.E006",
                    f"AWA['QUEUES'][{name!r}] has unknown option(s) {unknown}; "
                    f"known options: {sorted(_QUEUE_OPTIONS)}.",
                )
            )
        concurrency = options.get("concurrency", 10)
        if not _is_int(concurrency) or concurrency < 1:
            found.append(
                Problem(
                    "awa.E006",
                    f"AWA['QUEUES'][{name!r}]['concurrency'] must be a positive integer, "
                    f"got {concurrency!r}.",
                )
            )
        deadline = options.get("deadline_s", 0.0)
        if not _is_number(deadline) or deadline < 0:
            found.append(
                Problem(
                    "awa.E006",
                    f"AWA['QUEUES'][{name!r}]['deadline_s'] must be a number of seconds >= 0 "
                    f"(0 disables the deadline), got {deadline!r}.",
                )
            )
        found += _scheduling_problems(name, options)
        found += _queue_operator_problems(name, options)
    return found


def _queue_operator_problems(name: str, options: Mapping[str, Any]) -> list[Problem]:
    found: list[Problem] = []
    dlq = options.get("dlq", False)
    if not isinstance(dlq, bool):
        found.append(
            Problem(
                "awa.E020",
                f"AWA['QUEUES'][{name!r}]['dlq'] must be True or False, got {dlq!r}.",
            )
        )
    for option in _QUEUE_TEXT_OPTIONS:
        value = options.get(option, "")
        if not isinstance(value, str):
            found.append(
                Problem(
                    "awa.E021",
                    f"AWA['QUEUES'][{name!r}][{option!r}] must be a string, got {value!r}.",
                )
            )
    return found


def _runtime_problems(raw: Mapping[str, Any], defaults: AwaSettings) -> list[Problem]:
    found: list[Problem] = []
    interval = raw.get("RUNTIME_SNAPSHOT_INTERVAL_S", defaults.RUNTIME_SNAPSHOT_INTERVAL_S)
    stale = raw.get("RUNTIME_STALE_AFTER_S", defaults.RUNTIME_STALE_AFTER_S)
    for key, value in (("RUNTIME_SNAPSHOT_INTERVAL_S", interval), ("RUNTIME_STALE_AFTER_S", stale)):
        if not _is_number(value) or value <= 0:
            found.append(
                Problem("awa.E022", f"AWA[{key!r}] must be a positive number, got {value!r}.")
            )
    if _is_number(interval) and _is_number(stale) and stale < 2 * interval:
        found.append(
            Problem(
                "awa.E023",
                f"AWA['RUNTIME_STALE_AFTER_S'] ({stale}) must be at least 2 x "
                f"RUNTIME_SNAPSHOT_INTERVAL_S ({interval}), or live workers look stale between "
                "snapshots.",
            )
        )
    return found


def _scheduling_problems(name: str, options: Mapping[str, Any]) -> list[Problem]:
    """Priority aging, rate limit and weighted-mode options of one queue."""
    found: list[Problem] = []
    where = f"AWA['QUEUES'][{name!r}]"
    aging = options.get("aging_interval_s", 60.0)
    if not _is_number(aging) or aging < 0:
        found.append(
            Problem(
                "awa.E040",
                f"{where}['aging_interval_s'] must be a number of seconds >= 0 "
                f"(0 disables priority aging), got {aging!r}.",
            )
        )
    rate_limit = options.get("rate_limit")
    if rate_limit is not None and not (
        isinstance(rate_limit, list | tuple)
        and len(rate_limit) == 2
        and _is_number(rate_limit[0])
        and rate_limit[0] > 0
        and _is_int(rate_limit[1])
        and rate_limit[1] >= 1
    ):
        found.append(
            Problem(
                "awa.E041",
                f"{where}['rate_limit'] must be (jobs_per_second > 0, burst >= 1 integer) or "
                f"None, got {rate_limit!r}.",
            )
        )
    scope = options.get("rate_limit_scope", "process")
    if scope not in RATE_LIMIT_SCOPES:
        found.append(
            Problem(
                "awa.E042",
                f"{where}['rate_limit_scope'] must be one of {list(RATE_LIMIT_SCOPES)}, "
                f"got {scope!r}.",
            )
        )
    sequential = options.get("sequential_lanes", False)
    if not isinstance(sequential, bool):
        found.append(
            Problem(
                "awa.E046",
                f"{where}['sequential_lanes'] must be True or False, got {sequential!r}.",
            )
        )
    for key, low in (("min_concurrency", 0), ("weight", 1)):
        value = options.get(key, low)
        if not _is_int(value) or value < low:
            found.append(
                Problem(
                    "awa.E043",
                    f"{where}[{key!r}] must be an integer >= {low}, got {value!r}.",
                )
            )
    return found


def _weighted_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """AWA['WORKER_CONCURRENCY'] and how the queues' minimums fit in it."""
    limit = raw.get("WORKER_CONCURRENCY")
    queues = raw.get("QUEUES", {"default": {}})
    if limit is None:
        return []
    if not _is_int(limit) or limit < 1:
        return [
            Problem(
                "awa.E044",
                "AWA['WORKER_CONCURRENCY'] must be None (per-queue concurrency) or a positive "
                f"integer (weighted mode), got {limit!r}.",
            )
        ]
    if not isinstance(queues, Mapping):
        return []
    minimums = {
        name: options.get("min_concurrency", 0)
        for name, options in queues.items()
        if isinstance(options, Mapping)
    }
    if all(_is_int(v) for v in minimums.values()) and sum(minimums.values()) > limit:
        return [
            Problem(
                "awa.E045",
                f"The queues' min_concurrency add up to {sum(minimums.values())}, more than "
                f"AWA['WORKER_CONCURRENCY'] ({limit}); lower them or raise the limit.",
            )
        ]
    return []


def _database_problems(alias: object) -> list[Problem]:
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        return [
            Problem(
                "awa.E003",
                f"AWA['DATABASE_ALIAS'] is {alias!r}, which is not a key of settings.DATABASES.",
            )
        ]
    # The vendor (not the ENGINE string) so PostGIS and other PostgreSQL-based backends pass.
    if connections[alias].vendor != "postgresql":
        engine = settings.DATABASES[alias].get("ENGINE", "")
        return [
            Problem(
                "awa.E004",
                f"Database {alias!r} uses {engine!r}; awa_django needs PostgreSQL "
                "('django.db.backends.postgresql' or a backend built on it) with psycopg 3.",
            )
        ]
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        return [
            Problem(
                "awa.E004",
                f"Database {alias!r} runs on psycopg2; awa_django needs psycopg 3 "
                "(pip install 'psycopg[binary]').",
            )
        ]
    return []


def _scalar_problems(raw: Mapping[str, Any], defaults: AwaSettings) -> list[Problem]:
    found: list[Problem] = []
    queues = raw.get("QUEUES", {"default": {}})
    default_queue = raw.get("DEFAULT_QUEUE", defaults.DEFAULT_QUEUE)
    if isinstance(queues, Mapping) and default_queue not in queues:
        found.append(
            Problem(
                "awa.E007",
                f"AWA['DEFAULT_QUEUE'] is {default_queue!r}, which is not declared in "
                "AWA['QUEUES'].",
            )
        )
    priority = raw.get("DEFAULT_PRIORITY", defaults.DEFAULT_PRIORITY)
    if not _is_int(priority) or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        found.append(
            Problem(
                "awa.E008",
                f"AWA['DEFAULT_PRIORITY'] must be an integer {PRIORITY_MIN}..{PRIORITY_MAX}, "
                f"got {priority!r}.",
            )
        )
    attempts = raw.get("DEFAULT_MAX_ATTEMPTS", defaults.DEFAULT_MAX_ATTEMPTS)
    if not _is_int(attempts) or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT:
        found.append(
            Problem(
                "awa.E009",
                f"AWA['DEFAULT_MAX_ATTEMPTS'] must be an integer 1..{MAX_ATTEMPTS_LIMIT}, "
                f"got {attempts!r}.",
            )
        )
    for key in _POSITIVE_NUMBERS:
        value = raw.get(key, getattr(defaults, key))
        if not _is_number(value) or value <= 0:
            found.append(
                Problem("awa.E010", f"AWA[{key!r}] must be a positive number, got {value!r}.")
            )
    for key in _NON_NEGATIVE_NUMBERS:
        value = raw.get(key, getattr(defaults, key))
        if not _is_number(value) or value < 0:
            found.append(Problem("awa.E010", f"AWA[{key!r}] must be a number >= 0, got {value!r}."))
    interval = raw.get("HEARTBEAT_INTERVAL_S", defaults.HEARTBEAT_INTERVAL_S)
    staleness = raw.get("HEARTBEAT_STALENESS_S", defaults.HEARTBEAT_STALENESS_S)
    if _is_number(interval) and _is_number(staleness) and staleness < 3 * interval:
        found.append(
            Problem(
                "awa.E012",
                f"AWA['HEARTBEAT_STALENESS_S'] ({staleness}) must be at least 3 x "
                f"HEARTBEAT_INTERVAL_S ({interval}), or live jobs get rescued between heartbeats.",
            )
        )
    for key in _POSITIVE_INTEGERS:
        value = raw.get(key, getattr(defaults, key))
        if not _is_int(value) or value < 1:
            found.append(
                Problem("awa.E010", f"AWA[{key!r}] must be a positive integer, got {value!r}.")
            )
    jitter = raw.get("RETRY_JITTER", defaults.RETRY_JITTER)
    if not _is_number(jitter) or not 0 <= jitter <= 1:
        found.append(
            Problem("awa.E010", f"AWA['RETRY_JITTER'] must be between 0 and 1, got {jitter!r}.")
        )
    modules = raw.get("JOB_MODULES", ())
    if not isinstance(modules, list | tuple) or not all(isinstance(m, str) for m in modules):
        found.append(
            Problem(
                "awa.E011", f"AWA['JOB_MODULES'] must be a list of module paths, got {modules!r}."
            )
        )
    external = raw.get("EXTERNAL_KINDS", ())
    if not isinstance(external, list | tuple) or not all(
        isinstance(k, str) and k and "*" not in k[:-1] for k in external
    ):
        found.append(
            Problem(
                "awa.E013",
                "AWA['EXTERNAL_KINDS'] must be a list of job kinds, or prefixes ending in '*' "
                f"('billing.*'), got {external!r}.",
            )
        )
    return found


def _callback_problems(raw: Mapping[str, Any]) -> list[Problem]:
    found: list[Problem] = []
    secret = raw.get("CALLBACK_SECRET", "")
    if not isinstance(secret, str) or 0 < len(secret) < MIN_CALLBACK_SECRET_LENGTH:
        found.append(
            Problem(
                "awa.E050",
                f"AWA['CALLBACK_SECRET'] must be a string of at least "
                f"{MIN_CALLBACK_SECRET_LENGTH} characters (e.g. secrets.token_hex(32)), "
                "or empty to disable signed callbacks.",
            )
        )
    allow = raw.get("CALLBACK_ALLOW_UNSIGNED", False)
    if not isinstance(allow, bool):
        found.append(
            Problem(
                "awa.E051", f"AWA['CALLBACK_ALLOW_UNSIGNED'] must be True or False, got {allow!r}."
            )
        )
    max_age = raw.get("CALLBACK_MAX_AGE_S", 300.0)
    if not _is_number(max_age) or max_age <= 0:
        found.append(
            Problem(
                "awa.E052",
                f"AWA['CALLBACK_MAX_AGE_S'] must be a positive number of seconds, got {max_age!r}.",
            )
        )
    max_body = raw.get("CALLBACK_MAX_BODY_BYTES", 65536)
    if not _is_int(max_body) or max_body < 1:
        found.append(
            Problem(
                "awa.E053",
                f"AWA['CALLBACK_MAX_BODY_BYTES'] must be a positive integer, got {max_body!r}.",
            )
        )
    base_url = raw.get("CALLBACK_BASE_URL", "")
    if not isinstance(base_url, str) or (
        base_url and not re.match(r"^https?://[^/?#\s]+(/[^?#\s]*)?$", base_url)
    ):
        found.append(
            Problem(
                "awa.E054",
                "AWA['CALLBACK_BASE_URL'] must be empty or an absolute http(s) URL such as "
                f"'https://app.example.com', got {base_url!r}.",
            )
        )
    return found


def _cron_problems(entries: object) -> list[Problem]:
    # Only the shape: each entry's fields are checked with the @awa.periodic declarations
    # (awa_django.declarations.cron), which need the job registry.
    if isinstance(entries, list | tuple) and all(isinstance(e, Mapping) for e in entries):
        return []
    return [
        Problem(
            "awa.E034",
            f"AWA['CRON'] must be a list of dicts (one per schedule), got {entries!r}.",
        )
    ]


def _dx_problems(raw: Mapping[str, Any]) -> list[Problem]:
    found = [
        Problem("awa.E060", f"AWA[{key!r}] must be True or False, got {raw[key]!r}.")
        for key in ("EAGER", "EAGER_RAISE", "WORKER_SESSION")
        if key in raw and not isinstance(raw[key], bool)
    ]
    target = raw.get("WORKER_DATABASE")
    if target is not None and (
        not isinstance(target, str) or not (target in settings.DATABASES or is_dsn(target))
    ):
        found.append(
            Problem(
                "awa.E061",
                f"AWA['WORKER_DATABASE'] is {target!r}: give a key of settings.DATABASES or a "
                "libpq connection string ('postgresql://...' or 'host=... dbname=...').",
            )
        )
    return found


def _job_log_problems(raw: Mapping[str, Any]) -> list[Problem]:
    # The two numeric JOB_LOG_* keys are checked with the other positive numbers.
    job_log = raw.get("JOB_LOG", JOB_LOG_MODES[0])
    if job_log in JOB_LOG_MODES:
        return []
    return [
        Problem(
            "awa.E070", f"AWA['JOB_LOG'] must be one of {list(JOB_LOG_MODES)}, got {job_log!r}."
        )
    ]


def _admin_problems(raw: Mapping[str, Any], defaults: AwaSettings) -> list[Problem]:
    timeout = raw.get("ADMIN_STATEMENT_TIMEOUT_MS", defaults.ADMIN_STATEMENT_TIMEOUT_MS)
    # PostgreSQL's statement_timeout is an int of milliseconds; 0 there would mean no limit.
    if _is_int(timeout) and 1 <= timeout <= 2**31 - 1:
        return []
    return [
        Problem(
            "awa.E080",
            "AWA['ADMIN_STATEMENT_TIMEOUT_MS'] must be a whole number of milliseconds from 1 to "
            f"{2**31 - 1} (the admin's statements always have a limit), got {timeout!r}.",
        )
    ]


def is_dsn(value: str) -> bool:
    """Whether ``value`` reads as a libpq connection string (URI or key=value pairs)."""
    return value.startswith(("postgres://", "postgresql://")) or "=" in value


def problems() -> list[Problem]:
    """Every invalid value in ``settings.AWA`` (empty when the settings are usable)."""
    raw = getattr(settings, "AWA", {})
    if not isinstance(raw, Mapping):
        return [Problem("awa.E001", f"settings.AWA must be a dict, got {type(raw).__name__}.")]
    defaults = AwaSettings()
    known = set(AwaSettings.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    found = [
        Problem("awa.E002", f"settings.AWA has unknown key {key!r}; known keys: {sorted(known)}.")
        for key in unknown
    ]
    found += _database_problems(raw.get("DATABASE_ALIAS", defaults.DATABASE_ALIAS))
    found += _queue_problems(raw.get("QUEUES", {"default": {}}))
    found += _scalar_problems(raw, defaults)
    found += _callback_problems(raw)
    found += _cron_problems(raw.get("CRON", ()))
    found += _runtime_problems(raw, defaults)
    found += _dx_problems(raw)
    found += _job_log_problems(raw)
    found += _admin_problems(raw, defaults)
    found += _weighted_problems(raw)
    return found


def _queue_settings(name: str, options: Mapping[str, Any]) -> QueueSettings:
    values = dict(options)
    if values.get("rate_limit") is not None:
        rate, burst = values["rate_limit"]
        values["rate_limit"] = (float(rate), int(burst))
    return QueueSettings(name=name, **values)


def scheduling_warnings() -> list[Problem]:
    """Queue options that are valid but have no effect in the chosen concurrency mode."""
    raw = getattr(settings, "AWA", {})
    queues = raw.get("QUEUES", {}) if isinstance(raw, Mapping) else {}
    if problems() or not isinstance(queues, Mapping):
        return []
    weighted = raw.get("WORKER_CONCURRENCY") is not None
    found: list[Problem] = []
    for name, options in queues.items():
        if not weighted and ({"min_concurrency", "weight"} & set(options)):
            found.append(
                Problem(
                    "awa.W040",
                    f"AWA['QUEUES'][{name!r}] sets min_concurrency/weight, which only apply in "
                    "weighted mode; set AWA['WORKER_CONCURRENCY'] or remove them.",
                )
            )
        if weighted and "concurrency" in options:
            found.append(
                Problem(
                    "awa.W041",
                    f"AWA['QUEUES'][{name!r}] sets concurrency, which weighted mode "
                    "(AWA['WORKER_CONCURRENCY']) does not use; use min_concurrency and weight.",
                )
            )
    return found


@cache
def get_settings() -> AwaSettings:
    """The validated settings; raises ``ConfigError`` when ``settings.AWA`` is invalid."""
    found = problems()
    if found:
        raise ConfigError(f"{found[0].message} ({found[0].id}; run manage.py check for all)")
    raw: Mapping[str, Any] = getattr(settings, "AWA", {})
    values = dict(raw)
    queues = raw.get("QUEUES", {"default": {}})
    values["QUEUES"] = MappingProxyType(
        {name: _queue_settings(name, options) for name, options in queues.items()}
    )
    values["JOB_MODULES"] = tuple(raw.get("JOB_MODULES", ()))
    values["EXTERNAL_KINDS"] = tuple(raw.get("EXTERNAL_KINDS", ()))
    values["CRON"] = tuple(MappingProxyType(dict(entry)) for entry in raw.get("CRON", ()))
    return AwaSettings(**values)


def clear_cache() -> None:
    """Forget the cached settings (called when ``settings.AWA`` changes)."""
    get_settings.cache_clear()


@receiver(setting_changed)
def reset_settings_cache(*, setting: str, **_: Any) -> None:
    """Rebuild ``get_settings()`` after ``override_settings`` touches AWA or DATABASES."""
    if setting in ("AWA", "DATABASES"):
        clear_cache()
