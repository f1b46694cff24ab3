"""Descriptors: what code declares about queues and job kinds, as operators see it.

Declared in code: ``AWA["QUEUES"][name]`` takes ``display_name``, ``description``, ``owner``
(and ``dlq``); ``@awa.job(..., description=, owner=, docs_url=)`` describes a kind. Every
worker upserts its declarations at start and with each runtime snapshot, each with a content
hash, and reports the hashes in its runtime row. Read back with ``awa.descriptors.queues()`` and
``awa.descriptors.kinds()``:

- ``stale``: no live runtime refreshed the descriptor within ``RUNTIME_STALE_AFTER_S`` (the code
  that declared it is no longer running anywhere);
- ``drift``: live runtimes declare it with different hashes (a deploy in progress, or workers
  with different settings); ``runtime_hashes`` says which runtime declares which.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections

from awa_django.conf import AwaSettings, get_settings
from awa_django.jobs import Job
from awa_django.storage.runtime import list_descriptors


def _content_hash(fields: dict[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDeclaration:
    queue: str
    display_name: str
    description: str
    owner: str
    dlq: bool

    @property
    def hash(self) -> str:
        return _content_hash(
            {
                "display_name": self.display_name,
                "description": self.description,
                "owner": self.owner,
                "dlq": self.dlq,
            }
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KindDeclaration:
    kind: str
    queue: str | None
    description: str
    owner: str
    docs_url: str

    @property
    def hash(self) -> str:
        return _content_hash(
            {
                "queue": self.queue,
                "description": self.description,
                "owner": self.owner,
                "docs_url": self.docs_url,
            }
        )


@dataclass(frozen=True, slots=True)
class Declarations:
    """What one process declares: every queue of its settings and every registered kind."""

    queues: tuple[QueueDeclaration, ...] = ()
    kinds: tuple[KindDeclaration, ...] = ()


def declared(conf: AwaSettings, jobs: Iterable[Job[Any, Any]]) -> Declarations:
    """The declarations of ``conf``'s queues and of ``jobs`` (later registrations of a kind
    win, as in the registry)."""
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
            for q in conf.QUEUES.values()
        ),
        kinds=tuple(kinds[kind] for kind in sorted(kinds)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDescriptor:
    """A queue's descriptor as stored, with its derived ``stale`` and ``drift``."""

    queue: str
    display_name: str
    description: str
    owner: str
    dlq_enabled: bool
    descriptor_hash: str
    changed_at: datetime
    refreshed_at: datetime
    stale: bool
    drift: bool
    # Live runtime instance id -> the hash it declares.
    runtime_hashes: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class KindDescriptor:
    """A job kind's descriptor as stored, with its derived ``stale`` and ``drift``."""

    kind: str
    queue: str | None
    description: str
    owner: str
    docs_url: str
    descriptor_hash: str
    changed_at: datetime
    refreshed_at: datetime
    stale: bool
    drift: bool
    runtime_hashes: dict[str, str]


def queues() -> list[QueueDescriptor]:
    """Every queue descriptor any worker published, by name."""
    conf = get_settings()
    with connections[conf.DATABASE_ALIAS].cursor() as cursor:
        rows = list_descriptors(cursor, of="queue", stale_after_s=conf.RUNTIME_STALE_AFTER_S)
    return [QueueDescriptor(**row) for row in rows]


def kinds() -> list[KindDescriptor]:
    """Every job-kind descriptor any worker published, by kind."""
    conf = get_settings()
    with connections[conf.DATABASE_ALIAS].cursor() as cursor:
        rows = list_descriptors(cursor, of="kind", stale_after_s=conf.RUNTIME_STALE_AFTER_S)
    return [KindDescriptor(**row) for row in rows]
