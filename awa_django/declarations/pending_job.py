"""``PendingJob``: what ``enqueue_on_commit`` returns, the job it enqueues once the caller's
transaction commits."""

from __future__ import annotations


class PendingJob:
    """A job ``enqueue_on_commit`` will enqueue when the transaction commits.

    ``job_id`` is None until then, and the job's id from the commit on (for a unique job whose
    duplicate was dropped, the id of the job that holds its key). ``awa.wait`` and
    ``awa.await_job`` accept it in place of an id. A transaction that rolls back enqueues
    nothing, and its ``PendingJob`` stays pending."""

    __slots__ = ("_job_id", "kind")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._job_id: int | None = None

    @property
    def job_id(self) -> int | None:
        return self._job_id

    @property
    def enqueued(self) -> bool:
        return self._job_id is not None

    def enqueued_as(self, job_id: int) -> None:
        """Record the id the commit gave the job (called by ``enqueue_on_commit``'s hook)."""
        self._job_id = job_id

    def __repr__(self) -> str:
        where = "pending commit" if self._job_id is None else f"job_id={self._job_id}"
        return f"<PendingJob {self.kind} {where}>"
