"""The web-shaped producer benchmark: concurrent Django requests that enqueue inside their own
transaction (``python -m benchmarks.web``, ``make bench-web``, docs/benchmarks.md).

Each request is one ``transaction.atomic()`` that inserts a business row, enqueues one job (or
one to each of two queues, in random order, or two to the first queue), then does W ms more
work (``pg_sleep``) and commits. T threads send requests for a fixed time; the same request
with no enqueue at all is the ceiling. Every measurement runs in its own process
(``client.py``) on a fresh database.
"""

# The queues a request enqueues to: the first alone, or both in random order.
QUEUES = ("bench", "bench2")
# What a request enqueues: one job (`one`), one to each queue in random order (`two`), or two to
# the first queue (`double`: the same jobs as `two` without the second queue, which tells what
# the second queue costs from what the second job does).
VARIANTS = ("one", "two", "double")
# The table's "queues" column for each variant.
VARIANT_LABELS = {"one": "1", "two": "2", "double": "1, 2 jobs"}
# How a request thread holds its connection: kept across requests (a positive CONN_MAX_AGE, or a
# pool), or opened for each request and closed after it (Django's default CONN_MAX_AGE = 0).
CONNECTIONS = ("kept", "per-request")
