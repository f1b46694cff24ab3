-- Reverse of migration 0024_search_indexes: the search indexes (the partitions' go with the
-- parent's) and awa.error_text dropped, so that the earlier reverses find only their objects.
-- pg_trgm stays: other schemas may use it, and it holds no data of ours.
DROP INDEX awa.ready_entries_args, awa.ready_entries_tags, awa.deferred_jobs_args,
    awa.deferred_jobs_tags, awa.terminal_history_args, awa.terminal_history_tags,
    awa.dlq_entries_args, awa.dlq_entries_tags, awa.ready_entries_error_text,
    awa.done_entries_error_text, awa.ready_tombstones_reason, awa.deferred_jobs_error_text,
    awa.terminal_history_error_text, awa.dlq_entries_error_text;
DROP FUNCTION awa.error_text(jsonb);
