"""The operator API: job actions and reads, the DLQ, queues, shards, runtimes, descriptors,
health, job waits and cron operations (``awa.queues``, ``awa.dlq``, ...).

Below ``worker``, ``maintenance`` and ``callbacks`` (the worker publishes descriptors) and
above ``core``; it never enqueues through the producer.
"""
