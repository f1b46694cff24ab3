-- Reverse of migration 0033_failed_pages: the error text statistics go.
DROP STATISTICS awa.dlq_entries_error_text_stats;
DROP STATISTICS awa.terminal_history_error_text_stats;
DROP STATISTICS awa.deferred_jobs_error_text_stats;
