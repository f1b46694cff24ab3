"""What the awa_worker and awa_maintenance commands share: logging setup and running one
runtime as the process's main loop, with OS signals wired to a graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Final, TextIO

from awa_django.jobs import registry
from awa_django.worker import shutdown
from awa_django.worker.runtime import RunSummary, WorkerConfig, WorkerRuntime

VERBOSITY_LEVELS: Final = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}


def configure_logging(stream: TextIO, verbosity: int) -> None:
    """Set awa_django's log level from ``-v``; add a handler only when none would print."""
    logger = logging.getLogger("awa_django")
    logger.setLevel(VERBOSITY_LEVELS.get(verbosity, logging.INFO))
    if not logger.hasHandlers():
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)


def run_process(config: WorkerConfig, *streams: TextIO) -> RunSummary:
    """Run a runtime until it stops; the first SIGTERM/SIGINT drains, the second exits."""

    async def main() -> RunSummary:
        runtime = WorkerRuntime(config, registry.get)
        shutdown.install(asyncio.get_running_loop(), runtime.request_stop)
        return await runtime.run()

    summary = asyncio.run(main())
    if summary.abandoned:
        # Abandoned sync handlers still occupy pool threads, which the interpreter would join at
        # exit; their attempts are left for rescue, so leave without waiting for them.
        logging.shutdown()
        for stream in streams:
            stream.flush()
        os._exit(0)
    return summary
