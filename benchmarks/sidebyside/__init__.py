"""Side-by-side benchmark: awa_django against awa-pg, procrastinate and pgqueuer on one server.

``python -m benchmarks.sidebyside`` (``make bench``) runs it; docs/benchmarks.md describes the
workloads, the procedure and the latest figures.
"""
