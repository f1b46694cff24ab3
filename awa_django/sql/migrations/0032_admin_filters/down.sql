-- Reverse of migration 0032_admin_filters: the indexes and the DLQ's name functions go.
DROP INDEX awa.deferred_jobs_held;
DROP INDEX awa.dlq_entries_reason;
DROP INDEX awa.dlq_entries_error_type;
DROP FUNCTION awa.dlq_error_types(text);
DROP FUNCTION awa.dlq_kinds(text);
DROP FUNCTION awa.name_part_starts(text, text);
