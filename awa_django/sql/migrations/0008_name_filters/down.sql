-- Reverse of migration 0008_name_filters: the name indexes dropped (the partitions' indexes go
-- with the parent's), so that migration 0001's reverse finds only the objects it created.
DROP INDEX awa.ready_entries_queue_kind_job_id, awa.deferred_jobs_queue_kind_job_id,
    awa.terminal_history_queue_kind_job_id, awa.dlq_entries_queue_kind_job_id;
