-- Drops the compacted history and the live concurrency of every queue.

DROP TABLE awa.queue_stat_rollups;
ALTER TABLE awa.queue_meta
    DROP COLUMN concurrency,
    DROP COLUMN concurrency_set_at,
    DROP COLUMN concurrency_set_by;
