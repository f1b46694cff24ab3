"""Every SQL statement of the queue, grouped by plane; the only code that writes awa tables.

Enqueue-side functions are sync and run on a Django cursor, inside the caller's transaction.
Worker-side functions are async and run on the worker's own psycopg connections.
"""
