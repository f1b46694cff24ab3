"""What the awa_worker and awa_maintenance commands share: logging setup and running the
process root (with queues, or none for awa_maintenance) as the main loop, with OS signals wired to
a graceful shutdown."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Callable
from io import TextIOBase
from typing import Final

from django.db import connections as db_connections

from awa_django.logs import TRACE, JsonFormatter
from awa_django.worker import shutdown
from awa_django.worker.process import RunSummary, WorkerGroup, WorkerProcess

VERBOSITY_LEVELS: Final = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: TRACE}
LOG_FORMATS: Final = ("text", "json")


def add_log_format_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="Format of the log handler the command adds when logging is not configured: "
        "text lines, or one JSON object per line with the job fields (job_id, kind, ...).",
    )


def configure_logging(stream: TextIOBase, verbosity: int, log_format: str = "text") -> None:
    """Set awa_django's log level from ``-v``; add a handler only when none would print.

    ``log_format="json"`` puts a ``JsonFormatter`` on that handler, or, when ``LOGGING``
    already attached handlers to the ``awa_django`` logger itself, on those: asking for JSON
    on the command line must not be silently ignored. Handlers further up (root) are left
    alone; configure ``awa_django.logs.JsonFormatter`` in ``LOGGING`` for them.
    """
    logger = logging.getLogger("awa_django")
    logger.setLevel(VERBOSITY_LEVELS.get(verbosity, logging.INFO))
    if not logger.hasHandlers():
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    if log_format == "json":
        for attached in logger.handlers:
            attached.setFormatter(JsonFormatter())


def run_process(
    make: Callable[[], WorkerProcess | WorkerGroup], *streams: TextIOBase
) -> RunSummary:
    """Run the process ``make`` builds (inside the event loop) until it stops; the first
    SIGTERM/SIGINT drains, the second exits."""

    async def main() -> RunSummary:
        process = make()
        shutdown.install(asyncio.get_running_loop(), process.request_stop)
        return await process.run()

    # The startup checks (migrations) left a Django connection open on this thread, which the
    # process would hold, idle, for its whole life: a third server connection (docs/deployment.md,
    # "Scaling"). Nothing on this thread uses it again.
    db_connections.close_all()
    summary = asyncio.run(main())
    if summary.abandoned:
        # Abandoned sync handlers still occupy pool threads, which the interpreter would join at
        # exit; their attempts are left for rescue, so leave without waiting for them.
        logging.shutdown()
        for stream in streams:
            stream.flush()
        os._exit(0)
    return summary
