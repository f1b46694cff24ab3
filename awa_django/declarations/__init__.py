"""What code declares: job handlers and their registry, enqueue options, arguments, unique keys,
exact JSON, priorities, cron schedules and job discovery.

Below ``storage``: values that storage, core and every layer above read, importing only the
base modules (``conf``, ``exceptions``, ``job_record``, ``limits``, ``logs``, ``signals``,
``telemetry``).
"""
