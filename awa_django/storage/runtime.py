"""Runtimes and descriptors (control plane): the writes workers make about themselves (run on the
worker's pool) and the reads operators make (run on Django's connection). Every function builds
a ``Statement``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Protocol

from awa_django.sql import queries
from awa_django.storage.statement import (
    Statement,
    all_rows,
    any_row,
    columns,
    nothing,
    rows_of,
)

_SQL = queries("runtime")


# What a process declares (``ops.descriptors.Declarations``), by the fields written here: the
# descriptors module reads these tables, so storage names the fields instead of its classes.
class _Declared(Protocol):
    # What a queue's and a kind's descriptors both declare.
    @property
    def description(self) -> str: ...
    @property
    def owner(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def fields(self) -> dict[str, Any]: ...


class DeclaredQueue(_Declared, Protocol):
    @property
    def queue(self) -> str: ...
    @property
    def display_name(self) -> str: ...
    @property
    def dlq(self) -> bool: ...


class DeclaredKind(_Declared, Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def queue(self) -> str | None: ...
    @property
    def docs_url(self) -> str: ...


class DeclaredByProcess(Protocol):
    @property
    def queues(self) -> Sequence[DeclaredQueue]: ...
    @property
    def kinds(self) -> Sequence[DeclaredKind]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeSnapshot:
    """What one process reports about itself every snapshot interval."""

    instance_id: str
    hostname: str
    pid: int
    version: str
    started_at: datetime
    queues: dict[str, int]  # queue served -> concurrency
    in_flight: int
    is_leader: bool
    healthy: bool
    shutting_down: bool


def publish_declarations(declared: DeclaredByProcess) -> Statement[None]:
    """Publish each declared queue's DLQ policy, upsert queue and kind descriptors and record
    the values behind their hashes, in one statement."""
    params = _declared(declared)
    return Statement(sql=_SQL["publish_declarations"], params=params, read=nothing)


def sync_queue_policies(dlq_enabled: Mapping[str, bool]) -> Statement[None]:
    """Publish each queue's DLQ policy where the close statement reads it."""
    params = _declarations((), (), dlq_enabled)
    return Statement(sql=_SQL["publish_declarations"], params=params, read=nothing)


def _declared(declared: DeclaredByProcess) -> dict[str, list[Any]]:
    queues = declared.queues
    return _declarations(queues, declared.kinds, {q.queue: q.dlq for q in queues})


def _declarations(
    queues: Sequence[DeclaredQueue], kinds: Sequence[DeclaredKind], policies: Mapping[str, bool]
) -> dict[str, list[Any]]:
    versions = [("queue", q.queue, q.hash, q.fields) for q in queues]
    versions += [("kind", k.kind, k.hash, k.fields) for k in kinds]
    params: dict[str, list[Any]] = {
        "policy_queue": list(policies),
        "policy_dlq": list(policies.values()),
        **columns(queues, "queue", "display_name", "description", "owner", "dlq", "hash"),
        "kind": [k.kind for k in kinds],
        "kind_queue": [k.queue for k in kinds],
        "kind_description": [k.description for k in kinds],
        "kind_owner": [k.owner for k in kinds],
        "docs_url": [k.docs_url for k in kinds],
        "kind_hash": [k.hash for k in kinds],
        "described": [v[0] for v in versions],
        "names": [v[1] for v in versions],
        "hashes": [v[2] for v in versions],
        "fields": [json.dumps(v[3]) for v in versions],
    }
    return params


@dataclass(frozen=True, slots=True)
class RuntimeReport:
    """What the server answers a written snapshot."""

    # Live processes (refreshed within ``fresh_s``) that compete with this one for the leader
    # lock or for the candidate lock of one of its queues, itself included (the fewest over
    # those roles).
    peers: int
    # The live concurrency operators set, for those of its queues that have one.
    concurrency: dict[str, int]
    # Whether the stored descriptors or DLQ policies differ from what the process declares
    # (always False for the snapshot that published them).
    diverged: bool


def _concurrency(found: Mapping[str, Any]) -> dict[str, int]:
    return {q: int(n) for q, n in found.items()}


def _report(rows: list[Any]) -> RuntimeReport:
    peers, concurrency, diverged = rows[0]
    return RuntimeReport(
        peers=max(1, int(peers)), concurrency=_concurrency(concurrency), diverged=bool(diverged)
    )


def write_snapshot(
    snapshot: RuntimeSnapshot, declared: DeclaredByProcess, *, fresh_s: float, publish: bool
) -> Statement[RuntimeReport]:
    """Write the whole snapshot, after the declarations when ``publish`` (as
    ``publish_declarations``), and read back, in the same statement, the process's peers
    (counted among the rows refreshed within ``fresh_s``), its queues' live concurrency and,
    without ``publish``, whether the stored declarations differ from ``declared``. Prepared
    at its first run where the connection prepares (see ``touch_snapshot``)."""
    queues = declared.queues
    params = {
        **(_declared(declared) if publish else {}),
        "instance_id": snapshot.instance_id,
        "hostname": snapshot.hostname,
        "pid": snapshot.pid,
        "version": snapshot.version,
        "started_at": snapshot.started_at,
        "queues": json.dumps(snapshot.queues),
        "in_flight": snapshot.in_flight,
        "is_leader": snapshot.is_leader,
        "healthy": snapshot.healthy,
        "shutting_down": snapshot.shutting_down,
        "queue_hashes": json.dumps({q.queue: q.hash for q in queues}),
        "kind_hashes": json.dumps({k.kind: k.hash for k in declared.kinds}),
        "policies": json.dumps({q.queue: q.dlq for q in queues}),
        "fresh_s": fresh_s,
    }
    return Statement(
        sql=_SQL["publish_runtime" if publish else "report_runtime"],
        params=params,
        read=_report,
        json=("concurrency",),
        prepare=True,
    )


def touch_snapshot(*, instance_id: str) -> Statement[bool]:
    """Refresh the row's ``last_seen_at`` alone; False when there is no row to refresh.
    Prepared at its first run where the connection prepares: an idle process runs it a few
    times a minute, spread over the pool's connections, so psycopg's threshold (a fifth run on
    one connection) kept it planned on every run for the process's first minutes (#37)."""
    params = {"instance_id": instance_id}
    return Statement(sql=_SQL["touch_runtime"], params=params, read=any_row, prepare=True)


def _touched_concurrency(rows: list[Any]) -> dict[str, int] | None:
    touched, concurrency = rows[0]
    return _concurrency(concurrency) if touched else None


def touch_snapshot_reading_concurrency(
    *, instance_id: str, queues: Mapping[str, int]
) -> Statement[dict[str, int] | None]:
    """``touch_snapshot`` that also reads back, in the same statement, the live concurrency
    operators set on those of ``queues`` that have one (a poll-only process's refresh, #37);
    None when there is no row to refresh."""
    params = {"instance_id": instance_id, "queues": json.dumps(queues)}
    return Statement(
        sql=_SQL["touch_runtime_reading_concurrency"],
        params=params,
        read=_touched_concurrency,
        json=("concurrency",),
        prepare=True,
    )


def delete_runtime(*, instance_id: str) -> Statement[int]:
    """Delete a stopping process's row; answers how many went (0 or 1)."""
    params = {"instance_id": instance_id, "stale_after_s": None}
    return Statement(sql=_SQL["delete_runtimes"], params=params, read=len)


def delete_stale_runtimes(*, stale_after_s: float) -> Statement[int]:
    """Delete the rows of processes silent past ``stale_after_s``; answers how many went."""
    params = {"instance_id": None, "stale_after_s": stale_after_s}
    return Statement(sql=_SQL["delete_runtimes"], params=params, read=len)


def delete_undeclared_versions(*, stale_after_s: float) -> Statement[int]:
    """Delete recorded versions that no runtime row and no stored descriptor declares; answers
    how many went."""
    params = {"stale_after_s": stale_after_s}
    return Statement(sql=_SQL["delete_undeclared_versions"], params=params, read=len)


_RUNTIME_JSON: Final = ("queues",)
_DESCRIPTOR_JSON: Final = ("runtime_hashes",)


def list_runtimes(*, stale_after_s: float) -> Statement[list[dict[str, Any]]]:
    return _dicts("list_runtimes", stale_after_s, _RUNTIME_JSON)


def list_descriptors(*, of: str, stale_after_s: float) -> Statement[list[dict[str, Any]]]:
    """Queue (``of="queue"``) or kind (``of="kind"``) descriptors with stale and drift."""
    block = {"queue": "list_queue_descriptors", "kind": "list_kind_descriptors"}[of]
    return _dicts(block, stale_after_s, _DESCRIPTOR_JSON)


def _dicts(block: str, stale_after_s: float, json: tuple[str, ...]) -> Statement[list[Any]]:
    params = {"stale_after_s": stale_after_s}
    return Statement(sql=_SQL[block], params=params, read=all_rows, rows=rows_of(dict), json=json)


def declared_versions(
    *, described: str, name: str, hashes: Sequence[str]
) -> Statement[dict[str, dict[str, Any]]]:
    """The recorded fields behind those of ``hashes`` that a worker declared for the queue
    (``described="queue"``) or job kind (``"kind"``) ``name``, by hash."""
    return Statement(
        sql=_SQL["declared_versions"],
        params={"described": described, "name": name, "hashes": list(hashes)},
        read=_by_hash,
        json=("fields",),
    )


def _by_hash(rows: list[Any]) -> dict[str, dict[str, Any]]:
    return {descriptor_hash: fields for descriptor_hash, fields in rows}
