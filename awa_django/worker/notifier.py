"""LISTEN/NOTIFY wakeups: the process's session connection (``storage.session``) listens for
new work and for cancelled attempts; this module says what each notification means.

Commits that publish work send ``pg_notify('awa', <queue>)`` while a worker waits for that
queue (``worker.wake``); cancel and rescue send ``pg_notify('awa_cancel',
'<job_id>:<run_lease>')``. Postgres delivers both at commit. The payloads carry the names, so no
identifier is ever built from a queue name. Notifications are a hint: dispatchers also poll and
heartbeats report closed attempts, so a lost notification or a dropped connection only delays
things; the session reconnects, and every dispatcher claims once it listens again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

logger = logging.getLogger(__name__)

WORK_CHANNEL: Final = "awa"
# The queue's waiting candidate gave its locks back ('<queue>', ``worker.wake``): every process
# sleeping behind its candidacy claims, where new work wakes only the candidate.
HANDOVER_CHANNEL: Final = "awa_handover"
CANCEL_CHANNEL: Final = "awa_cancel"
# A sequential callback wait was resumed: '<job_id>:<run_lease>'.
CALLBACK_CHANNEL: Final = "awa_callback"
# An operator changed a queue's live concurrency: '<queue>'.
CONTROL_CHANNEL: Final = "awa_control"
LISTEN_CHANNELS: Final = (
    WORK_CHANNEL,
    HANDOVER_CHANNEL,
    CANCEL_CHANNEL,
    CALLBACK_CHANNEL,
    CONTROL_CHANNEL,
)


class Notifier:
    """Calls ``on_queue(queue)`` for new work, ``on_handover(queue)`` when the queue's waiting
    candidate gave its locks back, ``on_cancel(job_id, run_lease)`` for closed
    attempts, ``on_callback(job_id, run_lease)`` for resumed callback waits and
    ``on_control(queue)`` for a queue's changed concurrency."""

    def __init__(
        self,
        *,
        on_queue: Callable[[str], None],
        on_handover: Callable[[str], None],
        on_cancel: Callable[[int, int], None],
        on_callback: Callable[[int, int], None] | None = None,
        on_control: Callable[[str], None] | None = None,
    ) -> None:
        self._on_queue = on_queue
        self._on_handover = on_handover
        self._on_cancel = on_cancel
        self._on_callback = on_callback
        self._on_control = on_control

    def dispatch(self, channel: str, payload: str) -> None:
        if channel == WORK_CHANNEL:
            self._on_queue(payload)
        elif channel == HANDOVER_CHANNEL:
            self._on_handover(payload)
        elif channel == CANCEL_CHANNEL:
            job_id, _, run_lease = payload.partition(":")
            if job_id.isdigit() and run_lease.isdigit():
                self._on_cancel(int(job_id), int(run_lease))
        elif channel == CALLBACK_CHANNEL and self._on_callback is not None:
            job_id, _, run_lease = payload.partition(":")
            if job_id.isdigit() and run_lease.isdigit():
                self._on_callback(int(job_id), int(run_lease))
        elif channel == CONTROL_CHANNEL and self._on_control is not None:
            self._on_control(payload)
