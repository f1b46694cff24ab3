"""Every SQL statement of the queue, grouped by plane; the only code that writes awa tables.

A statement both sides run is a ``statement.Statement`` value, executed on a Django cursor by
``statement.run`` or on a worker's psycopg connection by ``statement.run_async``. Functions only
one side calls take its connection: enqueue-side and operator ones a Django cursor (inside the
caller's transaction), worker- and leader-side ones the worker's own psycopg connections.
"""
