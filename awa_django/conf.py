"""The only reader of ``settings.AWA``: typed, validated settings with one set of defaults.

Each field of ``AwaSettings`` and ``QueueSettings`` carries its default, its meaning (the
comment above it) and its rule (``Annotated[type, rule]``, see ``conf_rules``), which gives the
``awa.E0xx`` id and message for a bad value. Rules that relate several settings are the small
functions in ``_RELATIONS``. ``problems()`` returns every invalid value: system checks report
them, and ``get_settings()`` raises ``ConfigError`` on the first so nothing runs on bad
settings. ``get_settings()`` builds a frozen ``AwaSettings`` once and caches it; a
``setting_changed`` receiver (``reset_settings_cache``, connected as this module is imported,
before any settings are cached) clears the cache so ``override_settings`` works.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any, Final

from django.conf import settings
from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver

from awa_django.conf_rules import Problem as Problem
from awa_django.conf_rules import (
    Rule,
    between,
    field_problems,
    flag,
    integer,
    is_int,
    is_number,
    list_of,
    number,
    one_of,
    text,
)
from awa_django.exceptions import ConfigError, UnknownDatabase

PRIORITY_MIN: Final = 1
PRIORITY_MAX: Final = 4
MAX_ATTEMPTS_LIMIT: Final = 1000
QUEUE_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
# Shortest CALLBACK_SECRET accepted: 32 characters, e.g. 16 random bytes as hex.
MIN_CALLBACK_SECRET_LENGTH: Final = 32
RATE_LIMIT_SCOPES: Final = ("process", "fleet")
JOB_LOG_MODES: Final = ("per_job", "summary")
# PostgreSQL's statement_timeout is an int of milliseconds (and 0 there would mean no limit).
STATEMENT_TIMEOUT_MAX_MS: Final = 2**31 - 1
_CALLBACK_BASE_URL: Final = re.compile(r"^https?://[^/?#\s]+(/[^?#\s]*)?$")

# Rules shared by many fields.
_POSITIVE: Final = number("awa.E010", positive=True)
_AT_LEAST_ZERO: Final = number("awa.E010", positive=False)
_COUNT: Final = integer("awa.E010")


def _is_rate_limit(value: object) -> bool:
    return value is None or (
        isinstance(value, list | tuple)
        and len(value) == 2
        and is_number(value[0])
        and value[0] > 0
        and is_int(value[1])
        and value[1] >= 1
    )


def _is_kind_pattern(value: object) -> bool:
    # An exact kind, or a prefix with "*" only at its end.
    return isinstance(value, str) and bool(value) and "*" not in value[:-1]


def _is_callback_secret(value: object) -> bool:
    return isinstance(value, str) and not 0 < len(value) < MIN_CALLBACK_SECRET_LENGTH


def _is_base_url(value: object) -> bool:
    return isinstance(value, str) and (not value or bool(_CALLBACK_BASE_URL.match(value)))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSettings:
    """Per-queue options from ``AWA["QUEUES"][name]``."""

    name: str
    # Jobs of this queue one worker process runs at once (hard-reserved permits).
    concurrency: Annotated[int, integer("awa.E006")] = 10
    # Longest one attempt may run before its worker stops it (worker.deadline); 0: no limit,
    # as in Celery, so that a long job is never stopped by a default it did not choose.
    deadline_s: Annotated[
        float,
        number("awa.E006", positive=False, unit=" of seconds", note="0 disables the deadline"),
    ] = 0.0
    # A waiting job gains one priority step per this many seconds at claim time; 0 disables.
    aging_interval_s: Annotated[
        float,
        number("awa.E040", positive=False, unit=" of seconds", note="0 disables priority aging"),
    ] = 60.0
    # Token bucket (jobs per second, burst) applied before claims; None: unlimited.
    rate_limit: Annotated[
        tuple[float, int] | None,
        Rule("awa.E041", _is_rate_limit, "(jobs_per_second > 0, burst >= 1 integer) or None"),
    ] = None
    # "process": each worker process has its own bucket; "fleet": one budget for every worker,
    # kept in PostgreSQL (docs/scheduling.md).
    rate_limit_scope: Annotated[str, one_of("awa.E042", RATE_LIMIT_SCOPES)] = "process"
    # Weighted mode (AWA["WORKER_CONCURRENCY"] set): permits kept for this queue whenever it has
    # work, and its share of the capacity other queues leave idle.
    min_concurrency: Annotated[int, integer("awa.E043", low=0)] = 0
    weight: Annotated[int, integer("awa.E043", expects="an integer >= 1")] = 1
    # Each (priority, shard) lane runs one job at a time across the fleet, so jobs sharing an
    # ordering key finish in enqueue order (docs/scheduling.md).
    sequential_lanes: Annotated[bool, flag("awa.E046")] = False
    # Terminal failures go to the dead-letter queue (awa.dlq) instead of failed history.
    dlq: Annotated[bool, flag("awa.E020")] = False
    # Descriptor shown to operators (admin, awa_queues); empty when not declared.
    display_name: Annotated[str, text("awa.E021")] = ""
    description: Annotated[str, text("awa.E021")] = ""
    owner: Annotated[str, text("awa.E021")] = ""
    # The DATABASES alias this queue's jobs live in; "" : AWA["DATABASE_ALIAS"]. Every database
    # holding a queue has the whole schema (migrate --database) and its own maintenance leader;
    # checked by _queue_database_problems (docs/deployment.md, "Scaling").
    database: Annotated[str, text("awa.E090")] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AwaSettings:
    """Every ``AWA`` key with its default. Units are in the names."""

    # Django database alias that holds the awa schema; enqueue runs on this connection.
    # Checked against settings.DATABASES by _database_problems.
    DATABASE_ALIAS: str = "default"
    # Declared queues; enqueue rejects any other name. Checked by _queue_problems.
    QUEUES: Mapping[str, QueueSettings] = field(
        default_factory=lambda: MappingProxyType({"default": QueueSettings(name="default")})
    )
    # Queue used when neither the job nor the enqueue call names one; one of QUEUES.
    DEFAULT_QUEUE: str = "default"
    # 1 (most urgent) .. 4.
    DEFAULT_PRIORITY: Annotated[int, integer("awa.E008", PRIORITY_MIN, PRIORITY_MAX)] = 2
    # Attempts before a failing job ends as failed (1 .. 1000).
    DEFAULT_MAX_ATTEMPTS: Annotated[int, integer("awa.E009", 1, MAX_ATTEMPTS_LIMIT)] = 25
    # Modules the worker imports to register handlers, besides every installed app's ``jobs``.
    JOB_MODULES: Annotated[tuple[str, ...], list_of("awa.E011", str, "a list of module paths")] = ()
    # Poll fallback when no NOTIFY arrives.
    POLL_INTERVAL_S: Annotated[float, _POSITIVE] = 1.0
    # How often the maintenance leader moves due scheduled/retryable jobs into the ready ring.
    PROMOTE_INTERVAL_S: Annotated[float, _POSITIVE] = 1.0
    # Most deferred jobs moved per promotion statement.
    PROMOTE_BATCH_SIZE: Annotated[int, _COUNT] = 1000
    # Most jobs one claim statement takes for one queue.
    CLAIM_BATCH_SIZE: Annotated[int, _COUNT] = 100
    # Most completions written by one statement.
    COMPLETION_BATCH_SIZE: Annotated[int, _COUNT] = 500
    # Longest a finished job's result waits before its batch is written.
    COMPLETION_FLUSH_S: Annotated[float, _POSITIVE] = 0.002
    # Retry backoff: min(BASE * 2**(attempt-1), MAX), then up to JITTER * that added at random.
    RETRY_BACKOFF_BASE_S: Annotated[float, _POSITIVE] = 1.0
    RETRY_BACKOFF_MAX_S: Annotated[float, _POSITIVE] = 86400.0
    RETRY_JITTER: Annotated[float, between("awa.E010", 0, 1)] = 0.25
    # A job whose kind no worker that claimed it has a handler for runs again later without
    # using an attempt, until this long after the first such try; then it fails. 0: at once.
    UNKNOWN_KIND_TIMEOUT_S: Annotated[float, _AT_LEAST_ZERO] = 3600.0
    # Kinds this process may enqueue without a handler of its own (another service's workers
    # run them): exact kinds, or prefixes ending in "*" ("billing.*"; "*" for every kind).
    EXTERNAL_KINDS: Annotated[
        tuple[str, ...],
        list_of(
            "awa.E013",
            _is_kind_pattern,
            "a list of job kinds, or prefixes ending in '*' ('billing.*')",
        ),
    ] = ()
    # How long a stopping worker lets in-flight jobs finish.
    SHUTDOWN_TIMEOUT_S: Annotated[float, _POSITIVE] = 30.0
    # A worker heartbeats (and flushes progress of) its attempts older than this, this often.
    HEARTBEAT_INTERVAL_S: Annotated[float, _POSITIVE] = 30.0
    # An attempt silent for this long is rescued; at least 3 heartbeat intervals (E012).
    HEARTBEAT_STALENESS_S: Annotated[float, _POSITIVE] = 90.0
    # How often the leader looks for stale or overdue attempts to rescue.
    RESCUE_INTERVAL_S: Annotated[float, _POSITIVE] = 5.0
    # Most attempts one rescue pass closes.
    RESCUE_BATCH_SIZE: Annotated[int, _COUNT] = 500
    # How often the leader checks its lock (a non-leader tries to become leader every two).
    LEADER_ELECTION_INTERVAL_S: Annotated[float, _POSITIVE] = 2.0
    # How often the leader tries to rotate and to prune each ring.
    RING_INTERVAL_S: Annotated[float, _POSITIVE] = 1.0
    # Longest a prune waits for the locks on a slot before skipping it this time.
    RING_LOCK_TIMEOUT_MS: Annotated[int, _COUNT] = 50
    # Completed history is kept at least this long before its ring slot may be truncated: a
    # day, as Celery keeps results (docs/operations.md says what it costs).
    COMPLETED_RETENTION_S: Annotated[float, _AT_LEAST_ZERO] = 86400.0
    # Failed and cancelled history is kept at least this long (carried across prunes).
    FAILED_RETENTION_S: Annotated[float, _AT_LEAST_ZERO] = 259200.0
    # Dead-letter entries older than this are deleted by the leader.
    DLQ_RETENTION_S: Annotated[float, _AT_LEAST_ZERO] = 2592000.0
    # How often the leader runs retention cleanup, and the most rows one statement deletes.
    CLEANUP_INTERVAL_S: Annotated[float, _POSITIVE] = 60.0
    CLEANUP_BATCH_SIZE: Annotated[int, _COUNT] = 1000
    # How often the leader measures queue depth and lag for the OpenTelemetry gauges.
    QUEUE_STATS_INTERVAL_S: Annotated[float, _POSITIVE] = 30.0
    # "per_job": one INFO line per finished attempt. "summary": those lines at DEBUG, and one
    # INFO line per queue every JOB_LOG_SUMMARY_INTERVAL_S with its counts by outcome.
    JOB_LOG: Annotated[str, one_of("awa.E070", JOB_LOG_MODES)] = "per_job"
    JOB_LOG_SUMMARY_INTERVAL_S: Annotated[float, _POSITIVE] = 60.0
    # Most lines about failed attempts (retried, failed, dead-lettered) one process logs per job
    # kind per second; the others are counted, and the count logged in one line.
    JOB_LOG_FAILURES_PER_S: Annotated[int, _COUNT] = 10
    # Shared secret that signs HTTP callbacks (HMAC-SHA256, docs/callbacks.md); "" leaves the
    # callback endpoint refusing every request unless CALLBACK_ALLOW_UNSIGNED.
    CALLBACK_SECRET: Annotated[
        str,
        Rule(
            "awa.E050",
            _is_callback_secret,
            f"a string of at least {MIN_CALLBACK_SECRET_LENGTH} characters "
            "(e.g. secrets.token_hex(32)), or empty to disable signed callbacks",
            echo=False,
        ),
    ] = ""
    # Serve the callback endpoint without signatures when no secret is set (development only).
    CALLBACK_ALLOW_UNSIGNED: Annotated[bool, flag("awa.E051")] = False
    # A signed callback is accepted this long after (or before) its timestamp.
    CALLBACK_MAX_AGE_S: Annotated[float, number("awa.E052", positive=True, unit=" of seconds")] = (
        300.0
    )
    # Largest callback request body the endpoint reads (larger ones get 413).
    CALLBACK_MAX_BODY_BYTES: Annotated[int, integer("awa.E053")] = 65536
    # Scheme and host awa.callback_url() puts before the endpoint's path ("" : path only).
    CALLBACK_BASE_URL: Annotated[
        str,
        Rule(
            "awa.E054",
            _is_base_url,
            "empty or an absolute http(s) URL such as 'https://app.example.com'",
        ),
    ] = ""
    # Periodic schedules declared in settings (docs/scheduling.md), besides @awa.periodic ones.
    # Only their shape is checked here: each entry's fields are checked with the @awa.periodic
    # declarations (awa_django.declarations.cron), which need the job registry.
    CRON: Annotated[
        tuple[Mapping[str, Any], ...],
        list_of("awa.E034", lambda e: isinstance(e, Mapping), "a list of dicts (one per schedule)"),
    ] = ()
    # How often the leader evaluates cron schedules; the finest useful tick spacing.
    CRON_INTERVAL_S: Annotated[float, _POSITIVE] = 1.0
    # Most missed ticks one catch_up schedule replays after an outage; older ones are skipped.
    CRON_MAX_CATCH_UP: Annotated[int, _COUNT] = 100
    # None: every queue has its own hard-reserved concurrency. An integer: weighted mode, one
    # limit for the whole worker process shared by its queues (min_concurrency, weight; their
    # sum is checked by _weighted_problems).
    WORKER_CONCURRENCY: Annotated[
        int | None,
        Rule(
            "awa.E044",
            lambda v: v is None or (is_int(v) and v >= 1),
            "None (per-queue concurrency) or a positive integer (weighted mode)",
        ),
    ] = None
    # How often each worker writes its runtime snapshot and refreshes its descriptors.
    RUNTIME_SNAPSHOT_INTERVAL_S: Annotated[float, number("awa.E022", positive=True)] = 10.0
    # A runtime silent this long is not live (the leader deletes its row), and a descriptor no
    # live runtime refreshed for this long is stale. At least 2 snapshot intervals (E023).
    RUNTIME_STALE_AFTER_S: Annotated[float, number("awa.E022", positive=True)] = 60.0
    # Run each job in-process when its enqueueing transaction commits, instead of in a worker
    # (tests and simple dev setups; docs/testing.md#eager-mode).
    EAGER: Annotated[bool, flag("awa.E060")] = False
    # Eager mode: re-raise a job's exception from the commit once the job has failed for good.
    EAGER_RAISE: Annotated[bool, flag("awa.E060")] = False
    # Where workers connect (a DATABASES alias or a libpq DSN), when DATABASE_ALIAS goes through
    # a transaction pooler: workers need a session for LISTEN and the leader lock. None: the
    # DATABASE_ALIAS connection. Checked by _worker_database_problems.
    WORKER_DATABASE: str | None = None
    # False: workers and awa_maintenance hold no session connection, so that they may reach the
    # database through a transaction pooler: no LISTEN (dispatchers poll every POLL_INTERVAL_S),
    # no wake locks, and a leader lease row instead of the session advisory lock
    # (docs/deployment.md, "Scaling"). Every process of one fleet must use the same value.
    WORKER_SESSION: Annotated[bool, flag("awa.E060")] = True
    # Connections of a worker process's pool, which every claim, completion, heartbeat and
    # maintenance pass uses: a process holds this many plus its session connection. With 1 a
    # claim waits for a completion to be written and the drain is slower (docs/deployment.md,
    # "Scaling"); 2 lets them overlap.
    WORKER_POOL_SIZE: Annotated[int, _COUNT] = 2
    # Longest one database statement of an admin page may run before PostgreSQL cancels it
    # (statement_timeout): the page then says so, and an abandoned request leaves no query
    # running.
    ADMIN_STATEMENT_TIMEOUT_MS: Annotated[
        int,
        integer(
            "awa.E080",
            1,
            STATEMENT_TIMEOUT_MAX_MS,
            expects="a whole number of milliseconds from 1 to "
            f"{STATEMENT_TIMEOUT_MAX_MS} (the admin's statements always have a limit)",
        ),
    ] = 10_000

    def queue_database(self, queue: str) -> str:
        """The alias holding ``queue``'s jobs (an undeclared queue: ``DATABASE_ALIAS``)."""
        declared = self.QUEUES.get(queue)
        return (declared.database if declared else "") or self.DATABASE_ALIAS

    @property
    def databases(self) -> tuple[str, ...]:
        """Every alias holding a queue, ``DATABASE_ALIAS`` first."""
        found = dict.fromkeys([self.DATABASE_ALIAS])
        found.update(dict.fromkeys(self.queue_database(name) for name in self.QUEUES))
        return tuple(found)

    def operator_database(self, database: str | None = None, *, queue: str | None = None) -> str:
        """The alias an operator call acts on: ``database`` when given (it must hold queues:
        ``UnknownDatabase`` otherwise), else ``queue``'s database when the call names one,
        else ``DATABASE_ALIAS``. One rule for ops/, the commands and the admin."""
        if database is not None:
            if database not in self.databases:
                raise UnknownDatabase(database, self.databases)
            return database
        return self.queue_database(queue) if queue is not None else self.DATABASE_ALIAS

    def operator_databases(self, database: str | None = None) -> tuple[str, ...]:
        """The aliases a listing covers: ``database`` alone when given (checked as by
        ``operator_database``), else every database holding queues."""
        if database is not None:
            return (self.operator_database(database),)
        return self.databases

    @property
    def dlq_queues(self) -> frozenset[str]:
        """The queues whose terminal failures go to the dead-letter queue."""
        return frozenset(name for name, queue in self.QUEUES.items() if queue.dlq)


_DEFAULTS: Final = AwaSettings()
_QUEUE_OPTIONS: Final = frozenset(f.name for f in fields(QueueSettings)) - {"name"}


def _value(raw: Mapping[str, Any], key: str) -> Any:
    return raw.get(key, getattr(_DEFAULTS, key))


# Rules that look at more than one value (or outside AWA), in the order they are reported.


def _database_problems(raw: Mapping[str, Any]) -> list[Problem]:
    alias = _value(raw, "DATABASE_ALIAS")
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        return [
            Problem(
                "awa.E003",
                f"AWA['DATABASE_ALIAS'] is {alias!r}, which is not a key of settings.DATABASES.",
            )
        ]
    return _postgresql_problems(alias, "awa.E004")


def _postgresql_problems(alias: str, check_id: str) -> list[Problem]:
    """Whether the database behind ``alias`` is PostgreSQL on psycopg 3."""
    # The vendor (not the ENGINE string) so PostGIS and other PostgreSQL-based backends pass.
    if connections[alias].vendor != "postgresql":
        engine = settings.DATABASES[alias].get("ENGINE", "")
        return [
            Problem(
                check_id,
                f"Database {alias!r} uses {engine!r}; awa_django needs PostgreSQL "
                "('django.db.backends.postgresql' or a backend built on it) with psycopg 3.",
            )
        ]
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    if not is_psycopg3:
        return [
            Problem(
                check_id,
                f"Database {alias!r} runs on psycopg2; awa_django needs psycopg 3 "
                "(pip install 'psycopg[binary]').",
            )
        ]
    return []


def _queue_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """The shape of AWA['QUEUES']; each queue's options are checked by their fields' rules."""
    raw_queues = raw.get("QUEUES", {"default": {}})
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
        unknown = sorted(set(options) - _QUEUE_OPTIONS, key=str)
        if unknown:
            found.append(
                Problem(
                    "awa.E006",
                    f"AWA['QUEUES'][{name!r}] has unknown option(s) {unknown}; "
                    f"known options: {sorted(_QUEUE_OPTIONS)}.",
                )
            )
        found += field_problems(QueueSettings, options, f"AWA['QUEUES'][{name!r}]")
    return found


def _queue_database_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """Each queue's ``database``: a PostgreSQL alias of settings.DATABASES (its type: E090)."""
    raw_queues = raw.get("QUEUES", {"default": {}})
    if not isinstance(raw_queues, Mapping):
        return []
    found: list[Problem] = []
    for name, options in raw_queues.items():
        alias = options.get("database", "") if isinstance(options, Mapping) else ""
        if not isinstance(alias, str) or not alias:
            continue
        if alias not in settings.DATABASES:
            found.append(
                Problem(
                    "awa.E090",
                    f"AWA['QUEUES'][{name!r}]['database'] is {alias!r}, which is not a key of "
                    f"settings.DATABASES (aliases: {sorted(settings.DATABASES)}).",
                )
            )
            continue
        found += [
            Problem(p.id, f"AWA['QUEUES'][{name!r}]['database']: {p.message}")
            for p in _postgresql_problems(alias, "awa.E090")
        ]
    return found


def _default_queue_problems(raw: Mapping[str, Any]) -> list[Problem]:
    queues = raw.get("QUEUES", {"default": {}})
    default_queue = _value(raw, "DEFAULT_QUEUE")
    if not isinstance(queues, Mapping) or (
        isinstance(default_queue, str) and default_queue in queues
    ):
        return []
    return [
        Problem(
            "awa.E007",
            f"AWA['DEFAULT_QUEUE'] is {default_queue!r}, which is not declared in AWA['QUEUES'].",
        )
    ]


def _at_least(
    check: str, key: str, times: int, of: str, or_else: str
) -> Callable[[Mapping[str, Any]], list[Problem]]:
    """The relation ``key >= times x of`` (both numbers), reported as ``check``."""

    def problems(raw: Mapping[str, Any]) -> list[Problem]:
        value = _value(raw, key)
        other = _value(raw, of)
        if not (is_number(other) and is_number(value)) or value >= times * other:
            return []
        return [
            Problem(
                check,
                f"AWA['{key}'] ({value}) must be at least {times} x {of} ({other}), {or_else}.",
            )
        ]

    return problems


_heartbeat_problems: Final = _at_least(
    "awa.E012",
    "HEARTBEAT_STALENESS_S",
    3,
    "HEARTBEAT_INTERVAL_S",
    "or live jobs get rescued between heartbeats",
)
_runtime_problems: Final = _at_least(
    "awa.E023",
    "RUNTIME_STALE_AFTER_S",
    2,
    "RUNTIME_SNAPSHOT_INTERVAL_S",
    "or live workers look stale between snapshots",
)


def _worker_database_problems(raw: Mapping[str, Any]) -> list[Problem]:
    target = raw.get("WORKER_DATABASE")
    if target is None or (
        isinstance(target, str) and (target in settings.DATABASES or is_dsn(target))
    ):
        return []
    return [
        Problem(
            "awa.E061",
            f"AWA['WORKER_DATABASE'] is {target!r}: give a key of settings.DATABASES or a "
            "libpq connection string ('postgresql://...' or 'host=... dbname=...').",
        )
    ]


def _weighted_problems(raw: Mapping[str, Any]) -> list[Problem]:
    """Whether the queues' minimums fit in AWA['WORKER_CONCURRENCY'] (its own type: E044)."""
    limit = raw.get("WORKER_CONCURRENCY")
    queues = raw.get("QUEUES", {"default": {}})
    if not is_int(limit) or limit < 1 or not isinstance(queues, Mapping):
        return []
    minimums = [
        options.get("min_concurrency", 0)
        for options in queues.values()
        if isinstance(options, Mapping)
    ]
    if not all(is_int(v) for v in minimums) or sum(minimums) <= limit:
        return []
    return [
        Problem(
            "awa.E045",
            f"The queues' min_concurrency add up to {sum(minimums)}, more than "
            f"AWA['WORKER_CONCURRENCY'] ({limit}); lower them or raise the limit.",
        )
    ]


_RELATIONS: Final[tuple[Callable[[Mapping[str, Any]], list[Problem]], ...]] = (
    _database_problems,
    _queue_problems,
    _queue_database_problems,
    _default_queue_problems,
    _heartbeat_problems,
    _runtime_problems,
    _worker_database_problems,
    _weighted_problems,
)


def is_dsn(value: str) -> bool:
    """Whether ``value`` reads as a libpq connection string (URI or key=value pairs)."""
    return value.startswith(("postgres://", "postgresql://")) or "=" in value


def problems() -> list[Problem]:
    """Every invalid value in ``settings.AWA`` (empty when the settings are usable)."""
    raw = getattr(settings, "AWA", {})
    if not isinstance(raw, Mapping):
        return [Problem("awa.E001", f"settings.AWA must be a dict, got {type(raw).__name__}.")]
    known = {f.name for f in fields(AwaSettings)}
    found = [
        Problem("awa.E002", f"settings.AWA has unknown key {key!r}; known keys: {sorted(known)}.")
        for key in sorted(set(raw) - known, key=str)
    ]
    found += field_problems(AwaSettings, raw, "AWA")
    for relation in _RELATIONS:
        found += relation(raw)
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


@cache
def queue_databases() -> tuple[str, ...]:
    """``get_settings().databases``, computed once per settings (it is read at every enqueue)."""
    return get_settings().databases


def clear_cache() -> None:
    """Forget the cached settings (called when ``settings.AWA`` changes)."""
    get_settings.cache_clear()
    queue_databases.cache_clear()


@receiver(setting_changed)
def reset_settings_cache(*, setting: str, **_: Any) -> None:
    """Rebuild ``get_settings()`` after ``override_settings`` touches AWA or DATABASES."""
    if setting in ("AWA", "DATABASES"):
        clear_cache()
