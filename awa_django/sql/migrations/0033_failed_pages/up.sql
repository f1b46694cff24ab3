-- Statistics of the searchable error text (awa.error_text, migration 0024) of the tables kept
-- outside the ring, for the Jobs page's error search (issue #36). Their trigram indexes are
-- partial, and PostgreSQL reads no statistics from a partial index, so the planner guessed that
-- any text matched a handful of rows: searching a text most dead letters hold, it read every
-- match through the index, computing each one's text again for the index's recheck, to keep
-- the newest of them, where walking the newest entries finds as many at once. With these
-- statistics it knows a common text from a rare one. They cost ANALYZE the text of its sample
-- rows and nothing on any write; the ring's tables (ready rows, closures) get none, as no
-- statistics object reaches their partitions' scans.
CREATE STATISTICS awa.deferred_jobs_error_text_stats ON (awa.error_text(errors))
    FROM awa.deferred_jobs;
CREATE STATISTICS awa.terminal_history_error_text_stats ON (awa.error_text(errors))
    FROM awa.terminal_history;
CREATE STATISTICS awa.dlq_entries_error_text_stats ON (awa.error_text(errors))
    FROM awa.dlq_entries;
ANALYZE awa.deferred_jobs, awa.terminal_history, awa.dlq_entries;
