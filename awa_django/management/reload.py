"""``awa_worker --reload``: restart the worker when its code changes (development).

Django's autoreloader does the watching; the process layout is its own, made graceful for a
job worker. A supervisor process starts the worker as a child (with Django's
``RUN_MAIN=true`` marker) in its own process group, forwards SIGTERM/SIGINT to it, and starts
it again whenever it exits with status 3. In the child, the main thread runs Django's reloader
and the worker process runs on another thread; when a watched file changes, the reloader's
``file_changed`` signal first stops the worker the graceful way (no new claims, in-flight jobs
finish within the shutdown timeout, completions flushed, leadership released), then lets Django
exit with status 3. A job module that fails to import leaves the child watching for the fix
instead of exiting.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any, Final

from django.utils import autoreload

from awa_django.declarations.discovery import discover_jobs
from awa_django.declarations.jobs import registry
from awa_django.worker.process import WorkerConfig, WorkerGroup
from awa_django.worker.shutdown import FORCED_EXIT_STATUS

logger = logging.getLogger(__name__)

# The exit status with which a child asks to be started again (Django's convention).
RESTART_STATUS: Final = 3
# How often the child checks that its supervisor is still alive.
PARENT_CHECK_S: Final = 0.5
# Longest the worker waits for the reloader to start watching before it starts anyway.
WATCH_START_TIMEOUT_S: Final = 60.0


def run(configs: Sequence[WorkerConfig]) -> None:
    """Run the worker under the reloader: as the supervisor, or as its child."""
    if os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true":
        ReloadingWorker(configs).run()
    else:
        sys.exit(supervise())


def supervise() -> int:
    """Start the worker child again each time it exits with ``RESTART_STATUS``."""
    command = autoreload.get_child_arguments()
    env = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        # Its own process group: a terminal's Ctrl-C reaches the child once, through us.
        child = subprocess.Popen(command, env=env, close_fds=False, process_group=0)
        status = child.wait()
        if status != RESTART_STATUS or stopping:
            return status
        logger.info("restarting the worker")


class ReloadingWorker:
    """The child: Django's reloader on the main thread, the worker process on another."""

    def __init__(self, configs: Sequence[WorkerConfig]) -> None:
        self._configs = configs
        self._reloader = autoreload.get_reloader()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._worker: WorkerGroup | None = None
        self._thread: threading.Thread | None = None
        self._abandoned = 0
        self._signals = 0
        self._stop_requested = False
        self._watching = threading.Event()

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        autoreload.file_changed.connect(self._on_file_changed)
        autoreload.autoreload_started.connect(self._on_watching)
        threading.Thread(
            target=self._watch_parent, args=(os.getppid(),), daemon=True, name="awa-reload-parent"
        ).start()
        logger.info("watching for code changes with %s", type(self._reloader).__name__)
        autoreload.start_django(self._reloader, self._work)

    def _on_watching(self, sender: Any, **_: Any) -> None:
        self._watching.set()

    def _work(self) -> None:
        self._thread = threading.current_thread()
        # "worker ready" then also means that code changes are being watched.
        self._watching.wait(WATCH_START_TIMEOUT_S)
        try:
            # Imported here, under Django's check_errors: a broken job module is reported and
            # watched until it is fixed.
            discover_jobs()
            asyncio.run(self._main())
        finally:
            self._reloader.stop()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._worker = WorkerGroup(self._configs, registry.get)
        if self._stop_requested:
            self._worker.request_stop()
        summary = await self._worker.run()
        self._abandoned = summary.abandoned

    def _stop_worker(self) -> None:
        self._stop_requested = True
        if self._loop is not None and self._worker is not None:
            self._loop.call_soon_threadsafe(self._worker.request_stop)

    def _watch_parent(self, parent: int) -> None:
        # In its own process group, the child would outlive a supervisor killed outright
        # (SIGKILL, a crash): it drains and exits instead.
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        logger.warning("the reload supervisor is gone: stopping")
        self._stop_worker()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal, exiting without waiting for in-flight jobs")
            os._exit(FORCED_EXIT_STATUS)
        logger.info("shutdown requested signal=%s", signal.Signals(signum).name)
        self._stop_worker()

    def _on_file_changed(self, sender: Any, file_path: Any, **_: Any) -> None:
        logger.info("%s changed: draining in-flight jobs, then reloading", file_path)
        self._stop_worker()
        if self._thread is not None:
            self._thread.join(max(c.shutdown_timeout_s for c in self._configs) + 30)
        if self._abandoned:
            # Abandoned handlers still hold pool threads the interpreter would wait for; their
            # attempts are left for rescue, as at any shutdown.
            logging.shutdown()
            os._exit(RESTART_STATUS)
        # Returning nothing lets Django's reloader exit with RESTART_STATUS.
