"""OS signal handling for the worker: the first SIGTERM/SIGINT drains, the second exits at once."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable

logger = logging.getLogger(__name__)

# Exit status when a second signal cuts the drain short.
FORCED_EXIT_STATUS = 1


def install(loop: asyncio.AbstractEventLoop, begin_shutdown: Callable[[], None]) -> None:
    """Route SIGTERM and SIGINT to ``begin_shutdown`` once, then to an immediate exit."""
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        if len(received) == 1:
            logger.info("shutdown requested signal=%s", signal.Signals(signum).name)
            begin_shutdown()
        else:
            logger.warning("second signal, exiting without waiting for in-flight jobs")
            os._exit(FORCED_EXIT_STATUS)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
