"""The queues the side-by-side benchmark compares, one adapter module each.

Each adapter drives its queue only through that queue's own public API, on the fastest path its
documentation offers; docs/benchmarks.md lists, per system, which calls each workload makes.
Peers are imported lazily: a system whose package is missing is reported, not crashed on.
"""

from __future__ import annotations

import importlib

from benchmarks.sidebyside.systems.base import System

# name -> module defining ``SYSTEM``; the order is the table's.
MODULES = {
    "awa_django": "benchmarks.sidebyside.systems.awa_django",
    "awa_pg": "benchmarks.sidebyside.systems.awa_pg",
    "procrastinate": "benchmarks.sidebyside.systems.procrastinate",
    "pgqueuer": "benchmarks.sidebyside.systems.pgqueuer",
    "django_tasks_db": "benchmarks.sidebyside.systems.django_tasks_db",
}


def load(name: str) -> System:
    """The adapter for ``name``; ImportError if its package is not installed."""
    module = importlib.import_module(MODULES[name])
    system: System = module.SYSTEM
    return system
