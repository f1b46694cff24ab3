"""Callback tokens: ``<job_id>-<run_lease>-<callback id>``, naming one callback of one attempt.

The callback id is a random UUID (122 bits from the OS's CSPRNG), so a token cannot be guessed
from the job and attempt numbers it also carries; those let storage find the attempt by index
and reject a token of any other attempt of the same job.
"""

from __future__ import annotations

import re
import uuid
from typing import Final

from awa_django.exceptions import UnknownCallback
from awa_django.limits import MAX_ID
from awa_django.storage.callbacks import CallbackRef

_TOKEN: Final = re.compile(r"^([1-9][0-9]{0,18})-([1-9][0-9]{0,18})-([0-9a-f]{32})$")


def new_callback(job_id: int, run_lease: int) -> CallbackRef:
    """A fresh, unguessable callback for attempt ``(job_id, run_lease)``."""
    return CallbackRef(job_id, run_lease, uuid.uuid4())


def format_token(ref: CallbackRef) -> str:
    return f"{ref.job_id}-{ref.run_lease}-{ref.callback_id.hex}"


def parse_token(token: object) -> CallbackRef:
    """The callback a token names; ``UnknownCallback`` when it is not a token at all."""
    match = _TOKEN.match(token) if isinstance(token, str) else None
    # Nineteen digits can exceed bigint: no attempt has such an id, so it is no token either.
    if match is None or max(int(match[1]), int(match[2])) > MAX_ID:
        raise UnknownCallback(f"{token!r} is not an awa callback token")
    job_id, run_lease, callback_hex = match.groups()
    return CallbackRef(int(job_id), int(run_lease), uuid.UUID(hex=callback_hex))


def describe(ref: CallbackRef) -> str:
    """How messages and logs name a callback: by attempt, never by the secret part."""
    return f"callback of job {ref.job_id} attempt lease {ref.run_lease}"
