"""Benchmark harness for awa_django: enqueue and drain throughput on one local PostgreSQL.

Run it with ``make bench`` (a throwaway cluster, or ``DATABASE_URL``); see ``docs/benchmarks.md``
for what is measured and the latest figures. Benchmarks are not tests: nothing here asserts on
timings, only on correctness (every job completed exactly once).
"""
