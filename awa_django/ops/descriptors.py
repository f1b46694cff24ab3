"""Descriptors: what code declares about queues and job kinds, as operators see it.

Declared in code: ``AWA["QUEUES"][name]`` takes ``display_name``, ``description``, ``owner``
(and ``dlq``); ``@awa.job(..., description=, owner=, docs_url=)`` describes a kind. Every
worker upserts its declarations at start and with each runtime snapshot, each with a content
hash, records the fields behind each hash once (``awa.declared_versions``), and reports the
hashes in its runtime row. Read back with ``awa.descriptors.queues()`` and
``awa.descriptors.kinds()``:

- ``stale``: no live runtime refreshed the descriptor within ``RUNTIME_STALE_AFTER_S`` (the code
  that declared it is no longer running anywhere);
- ``drift``: live runtimes declare it with different hashes (a deploy in progress, or workers
  with different settings); ``runtime_hashes`` says which runtime declares which, and
  ``queue_drift_versions`` / ``kind_drift_versions`` what each hash stands for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any, Final, TypeVar

from django.db import connections

from awa_django.conf import AwaSettings, get_settings
from awa_django.declarations.jobs import DeclaredJob
from awa_django.storage.runtime import declared_versions, list_descriptors
from awa_django.storage.statement import run


def _content_hash(fields: dict[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Declaration:
    """A declaration: its first field names what it describes, the others are what it says."""

    @property
    def fields(self) -> dict[str, Any]:
        """What it says, as hashed and as the drift page shows it."""
        return {f.name: getattr(self, f.name) for f in dataclass_fields(self)[1:]}

    @property
    def hash(self) -> str:
        return _content_hash(self.fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDeclaration(_Declaration):
    queue: str
    display_name: str
    description: str
    owner: str
    dlq: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class KindDeclaration(_Declaration):
    kind: str
    queue: str | None
    description: str
    owner: str
    docs_url: str


D = TypeVar("D", bound=_Declaration)


@dataclass(frozen=True, slots=True)
class Declarations:
    """What one process declares: every queue of its settings and every registered kind."""

    queues: tuple[QueueDeclaration, ...] = ()
    kinds: tuple[KindDeclaration, ...] = ()


def declared(
    conf: AwaSettings, jobs: Iterable[DeclaredJob[Any, Any]], *, database: str | None = None
) -> Declarations:
    """The declarations of ``conf``'s queues and of ``jobs`` (later registrations of a kind
    win, as in the registry), each sorted by name: every worker writes its rows in one order.
    With ``database``, only the queues living there: each database gets its own queues'
    descriptors and DLQ switches (every kind, which any queue may carry)."""
    kinds = {
        job.kind: KindDeclaration(
            kind=job.kind,
            queue=job.queue,
            description=job.description,
            owner=job.owner,
            docs_url=job.docs_url,
        )
        for job in jobs
    }
    return Declarations(
        queues=tuple(
            QueueDeclaration(
                queue=q.name,
                display_name=q.display_name,
                description=q.description,
                owner=q.owner,
                dlq=q.dlq,
            )
            for q in sorted(conf.QUEUES.values(), key=lambda q: q.name)
            if database is None or conf.queue_database(q.name) == database
        ),
        kinds=tuple(kinds[kind] for kind in sorted(kinds)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stored:
    """What the stored row of a descriptor says beside its declaration."""

    descriptor_hash: str
    changed_at: datetime
    refreshed_at: datetime
    stale: bool
    drift: bool
    # Live runtime instance id -> the hash it declares.
    runtime_hashes: dict[str, str]

    def _declared(self, declaration: type[D], **renamed: str) -> D:
        # The declaration made of the record's fields of the same names (or the ``renamed`` ones).
        names = (f.name for f in dataclass_fields(declaration))
        return declaration(**{name: getattr(self, renamed.get(name, name)) for name in names})


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDescriptorRecord(_Stored):
    """A queue's descriptor as stored, with its derived ``stale`` and ``drift``."""

    queue: str
    display_name: str
    description: str
    owner: str
    dlq_enabled: bool

    @property
    def declaration(self) -> QueueDeclaration:
        """What the stored descriptor declares."""
        return self._declared(QueueDeclaration, dlq="dlq_enabled")


@dataclass(frozen=True, slots=True, kw_only=True)
class KindDescriptorRecord(_Stored):
    """A job kind's descriptor as stored, with its derived ``stale`` and ``drift``."""

    kind: str
    queue: str | None
    description: str
    owner: str
    docs_url: str

    @property
    def declaration(self) -> KindDeclaration:
        """What the stored descriptor declares."""
        return self._declared(KindDeclaration)


def queues(*, database: str | None = None) -> list[QueueDescriptorRecord]:
    """Every queue descriptor any worker published in ``database`` (default
    ``AWA["DATABASE_ALIAS"]``), by name."""
    return [QueueDescriptorRecord(**row) for row in _stored_rows("queue", database)]


def kinds(*, database: str | None = None) -> list[KindDescriptorRecord]:
    """Every job-kind descriptor any worker published in ``database`` (default
    ``AWA["DATABASE_ALIAS"]``), by kind."""
    return [KindDescriptorRecord(**row) for row in _stored_rows("kind", database)]


def _stored_rows(of: str, database: str | None) -> list[dict[str, Any]]:
    conf = get_settings()
    with connections[conf.operator_database(database)].cursor() as cursor:
        return run(cursor, list_descriptors(of=of, stale_after_s=conf.RUNTIME_STALE_AFTER_S))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeclaredVersion:
    """One of the differing declarations of a drifting descriptor: its hash, the live runtimes
    that declare it, and its fields when known. Every worker records the fields behind each of
    its hashes (``awa.declared_versions``); a version declared only by workers of awa_django
    0.1.0, which record nothing, is known when it is the stored descriptor (the last one
    written) or this process's own declaration."""

    hash: str
    instances: tuple[str, ...]
    fields: dict[str, Any] | None
    # "stored descriptor", "this process's code" or "recorded by its workers"; None when unknown.
    source: str | None


STORED: Final = "stored descriptor"
THIS_PROCESS: Final = "this process's code"
RECORDED: Final = "recorded by its workers"


def _versions(
    described: str,
    name: str,
    runtime_hashes: dict[str, str],
    known: list[tuple[str, dict[str, Any], str]],
    database: str | None,
) -> list[DeclaredVersion]:
    """The versions behind ``runtime_hashes``, the most declared first, each with the fields
    that differ between the versions known (all of them when only one is known)."""
    by_hash: dict[str, list[str]] = {}
    for instance, declared_hash in sorted(runtime_hashes.items()):
        by_hash.setdefault(declared_hash, []).append(instance)
    values: dict[str, tuple[dict[str, Any], str]] = {}
    for known_hash, fields, source in known:
        values.setdefault(known_hash, (fields, source))
    missing = [h for h in by_hash if h not in values]
    if missing:
        with connections[get_settings().operator_database(database)].cursor() as cursor:
            recorded = run(
                cursor, declared_versions(described=described, name=name, hashes=missing)
            )
        for known_hash, fields in recorded.items():
            values[known_hash] = (fields, RECORDED)
    known_fields = [values[h][0] for h in by_hash if h in values]
    names = list(known_fields[0]) if known_fields else []
    differing = [n for n in names if len({repr(f.get(n)) for f in known_fields}) > 1] or names
    return [
        DeclaredVersion(
            hash=declared_hash,
            instances=tuple(instances),
            fields={n: values[declared_hash][0].get(n) for n in differing}
            if declared_hash in values
            else None,
            source=values[declared_hash][1] if declared_hash in values else None,
        )
        for declared_hash, instances in sorted(by_hash.items(), key=lambda item: -len(item[1]))
    ]


def queue_drift_versions(
    descriptor: QueueDescriptorRecord, local: Declarations, *, database: str | None = None
) -> list[DeclaredVersion]:
    """What each live runtime declares for a drifting queue (see ``DeclaredVersion``)."""
    known = [(descriptor.descriptor_hash, descriptor.declaration.fields, STORED)]
    known += [(q.hash, q.fields, THIS_PROCESS) for q in local.queues if q.queue == descriptor.queue]
    return _versions("queue", descriptor.queue, descriptor.runtime_hashes, known, database)


def kind_drift_versions(
    descriptor: KindDescriptorRecord, local: Declarations, *, database: str | None = None
) -> list[DeclaredVersion]:
    """What each live runtime declares for a drifting job kind (see ``DeclaredVersion``)."""
    known = [(descriptor.descriptor_hash, descriptor.declaration.fields, STORED)]
    known += [(k.hash, k.fields, THIS_PROCESS) for k in local.kinds if k.kind == descriptor.kind]
    return _versions("kind", descriptor.kind, descriptor.runtime_hashes, known, database)
