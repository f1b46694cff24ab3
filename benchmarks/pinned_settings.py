"""Benchmark settings for the pinned-horizon run: the shipped defaults, except a short completed
retention so that ring prune visibly reclaims history during a ten-minute run."""

from __future__ import annotations

from benchmarks.settings import *  # noqa: F403

AWA = {**AWA, "COMPLETED_RETENTION_S": 30.0}  # noqa: F405
