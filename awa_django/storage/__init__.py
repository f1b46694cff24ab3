"""Every SQL statement of the queue, grouped by plane; the only code that writes awa tables.

A storage function builds a ``statement.Statement`` value (its SQL block, its parameters, how
its rows become the answer) and touches no connection; the caller runs it on the connection it
holds: ``statement.run`` on a Django cursor (enqueue, operator reads and actions, external
callback resolutions, eager mode: the caller's transaction), ``statement.run_async`` on one of
the worker's psycopg connections (the worker and the maintenance leader). Statements that must
commit together are an ``Atomic`` (``run_atomic`` / ``run_atomic_async``); a multi-statement
read is a tuple of statements the caller runs in order, or, when each statement depends on the
answers before it (the operator listings), a ``Read`` (``run_read``).

The planes and their modules:

- queue (enqueue, lanes, the ready ring): ``queue``, ``lanes``, ``copy_text``, ``eager``
- backlog (scheduled and retryable jobs, promotion): ``backlog``
- execution (claims, closes, heartbeats, waits): ``execution``, ``rate_limits``,
  ``callbacks``, ``wake``, ``waiters``, ``workflows``
- control (leadership, rings, retention, queue controls, runtimes and descriptors, cron,
  unique claims): ``control``, ``runtime``, ``cron``, ``unique``
- reads (records, samples, the audit, listings, the DLQ): ``jobs``, ``samples``, ``audit``,
  ``browse``, ``dlq``
- the executor and connections: ``statement``, ``connections``, ``session``,
  ``migration_state``

A bulk enqueue's COPY is a ``statement.Copy`` (its reservation, the COPY, the rows' lines),
streamed by ``run_copy``. The execution plane
(``execution``, ``lanes``, ``workflows``, ``eager``) is statements only: ``lanes.ensure_lanes``
runs its statement on a short connection it opens itself.
"""
