"""Tracebacks that start where the job's own code does.

A handler's exception travels up through the frames that ran it: the worker's executor and
handler threads, the ``django.tasks`` runner, ``asgiref``'s bridges in eager and in-process
runs. Those frames are the same for every job and say nothing about the failure, so every
traceback awa_django stores (a job's ``errors``, and through it the admin, the DLQ and
``awa_jobs``) or logs starts at the first frame after them: the handler's. Frames of
awa_django deeper down (a ``ctx.set_progress`` that raised, say) are kept: they belong to the
story. A traceback made only of runner frames (an error of awa_django's own) is kept whole.
"""

from __future__ import annotations

import traceback
from types import TracebackType
from typing import Final

# Modules (by ``__name__``) that only carry a call from the worker to the handler.
RUNNER_MODULES: Final = (
    "awa_django.worker.",
    "awa_django.tasks.runner",
    "asgiref.",
    "asyncio.",
    "concurrent.futures.",
)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _runs_handlers(tb: TracebackType) -> bool:
    name = tb.tb_frame.f_globals.get("__name__")
    return isinstance(name, str) and name.startswith(RUNNER_MODULES)


def from_handler(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from its first frame that is not the runner's (all of it when every frame is)."""
    first = tb
    while first is not None and _runs_handlers(first):
        first = first.tb_next
    return tb if first is None else first


def exc_info(exc: BaseException) -> ExcInfo:
    """``exc`` as ``logging``'s ``exc_info``, its traceback starting at the handler (the
    exception itself is left as it is)."""
    return type(exc), exc, from_handler(exc.__traceback__)


def format_exception(exc: BaseException) -> list[str]:
    """``traceback.format_exception(exc)``, starting at the handler; chained exceptions
    (``raise ... from``, an error while handling another) are shown as Python shows them."""
    return traceback.format_exception(*exc_info(exc))


def signature(exc: BaseException) -> tuple[object, ...]:
    """What makes two failures the same one: the exception's type and the places (file, line)
    its traceback passes through from the handler on; not its message, which often holds ids
    and counts."""
    places: list[tuple[str, int]] = []
    tb = from_handler(exc.__traceback__)
    while tb is not None:
        places.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return (type(exc), *places)
