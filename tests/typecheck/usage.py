"""Checked by mypy in CI (``make typecheck``), never run: the typed API of ``@awa.job`` and of
the enqueue options.

``warn_unused_ignores`` is on, so each ``# type: ignore[...]`` below is an expected error: if
the decorator stopped carrying the handler's parameters to ``enqueue``, the ignore would go
unused and mypy would fail.
"""

from __future__ import annotations

from typing import assert_type

import awa_django as awa
from awa_django.testing import perform, run_jobs


@awa.job(queue="email", max_attempts=5)
def send_welcome(ctx: awa.JobContext, user_id: int, note: str = "") -> bool:
    return bool(ctx.job_id and user_id and note)


@awa.job
async def resize(ctx: awa.JobContext, image_id: int, sizes: list[int]) -> None:
    return None


assert_type(send_welcome.enqueue(user_id=1), int)
assert_type(send_welcome.enqueue(user_id=1, note="hi"), int)
send_welcome.enqueue(user_id="1")  # type: ignore[arg-type]
send_welcome.enqueue(note="no user")  # type: ignore[call-arg]
send_welcome.enqueue(user_id=1, colour="red")  # type: ignore[call-arg]
send_welcome.enqueue_on_commit(user_id=None)  # type: ignore[arg-type]
assert_type(resize.enqueue(image_id=3, sizes=[64, 128]), int)
resize.enqueue(image_id=3, sizes="64")  # type: ignore[arg-type]
assert_type(send_welcome.enqueue_many([{"user_id": 1}]), list[int])

assert_type(perform(send_welcome, user_id=2), bool)
perform(send_welcome, user_id="2")  # type: ignore[arg-type]
assert_type(run_jobs(queue="email").completed, int)

bulk = send_welcome.using(queue="bulk", priority=4)
assert_type(bulk.enqueue(user_id=1), int)
bulk.enqueue(user_id="1")  # type: ignore[arg-type]
bulk.enqueue(note="no user")  # type: ignore[call-arg]
send_welcome.using(colour="red")  # type: ignore[call-arg]
send_welcome.using(priority="high")  # type: ignore[arg-type]

options = awa.EnqueueOptions(queue="email", tags=["welcome"])
options.queue = "default"  # type: ignore[misc]
assert_type(options.using(priority=3), awa.EnqueueOptions)
awa.EnqueueOptions(on_conflict="ignore")  # type: ignore[arg-type]
assert_type(awa.enqueue(send_welcome, args={"user_id": 1}, options=options), int)
assert_type(awa.enqueue_many(send_welcome, [{"user_id": 1}], options=options), list[int])
assert_type(
    awa.enqueue_on_commit(send_welcome, args={"user_id": 1}, unique=awa.Unique(), eager=True),
    awa.PendingJob,
)
assert_type(send_welcome.enqueue_on_commit(user_id=1).job_id, int | None)
assert_type(awa.wait(send_welcome.enqueue_on_commit(user_id=1), timeout=1), awa.JobRecord)
awa.enqueue(send_welcome, args={}, colour="red")  # type: ignore[call-arg]
awa.enqueue_on_commit(send_welcome, args={}, on_conflict="ignore")  # type: ignore[arg-type]
