"""Django signals awa_django sends. Declarations only; receivers live in the user's code.

Every signal is sent after the transaction that caused it commits.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent after the enqueueing transaction commits, with ``job_ids``, ``kind`` and ``queue``;
# ``sender`` is ``awa_django.jobs.Job``. Never sent for a job that rolled back.
job_enqueued = Signal()
