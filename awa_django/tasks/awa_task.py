"""``AwaTask``: Django's ``Task`` plus the awa-only options ``max_attempts`` and ``tags``.

``AwaBackend.task_class`` is ``AwaTask``, so every ``@task`` created for an awa backend is one;
stock code that never names the extra options behaves exactly like a plain ``Task``. The options
can be set where the task is declared (``@task(max_attempts=3, tags=["billing"])``: both
Django's ``@task`` and the backport's pass extra keyword arguments on to ``task_class``) or per
call with ``my_task.using(max_attempts=..., tags=...)``, which returns a modified copy like
Django's own ``using()``. A value left at ``None`` falls back to the backend's ``OPTIONS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, cast

from awa_django.tasks.compat import Task


# The same dataclass flags as Django's Task (and the backport's on Python >= 3.11): a frozen,
# slotted, keyword-only dataclass can only be extended by another with identical flags.
@dataclass(frozen=True, slots=True, kw_only=True)
class AwaTask(Task):  # type: ignore[type-arg]
    """A ``django.tasks`` task with awa's per-task ``max_attempts`` and ``tags``."""

    # Attempts before a failing task ends FAILED (1..AWA's limit); None: OPTIONS, then AWA.
    max_attempts: int | None = None
    # awa tags stored on the job, replacing OPTIONS["tags"]; None: OPTIONS["tags"].
    tags: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # Callers naturally pass a list; the task is frozen and hashable, so keep a tuple. A
        # bare string is left as is for the backend's validation to refuse, not split into
        # one tag per character.
        if isinstance(self.tags, Iterable) and not isinstance(self.tags, str | tuple):
            object.__setattr__(self, "tags", tuple(self.tags))
        # Named explicitly: slots=True rebuilds the class, which breaks zero-argument super().
        Task.__post_init__(self)

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | timedelta | None = None,
        backend: str | None = None,
        max_attempts: int | None = None,
        tags: Iterable[str] | None = None,
    ) -> AwaTask:
        """A copy with the given options changed, Django's ``using()`` plus ``max_attempts``
        and ``tags``; as in Django, an option left at ``None`` keeps its current value."""
        awa_changes: dict[str, Any] = {}
        if max_attempts is not None:
            awa_changes["max_attempts"] = max_attempts
        if tags is not None:
            awa_changes["tags"] = tags
        # The backport types run_after as a datetime only; Django's own using() takes both.
        changed = cast(
            AwaTask,
            Task.using(
                self,
                priority=priority,
                queue_name=queue_name,
                run_after=run_after,  # type: ignore[arg-type]
                backend=backend,
            ),
        )
        return replace(changed, **awa_changes) if awa_changes else changed
