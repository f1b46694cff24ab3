"""Waiting on asyncio events with a timeout, the way the loops of the worker and of the callback
hub sleep."""

from __future__ import annotations

import asyncio


async def wait_for_any(*events: asyncio.Event, timeout: float | None = None) -> None:
    """Return once any of ``events`` is set, or after ``timeout`` seconds."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
