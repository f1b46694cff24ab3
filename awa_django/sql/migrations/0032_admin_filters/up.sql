-- The admin's filters that read a big table whole (issue #36).
--
-- The DLQ's error-type filter (exact, or a prefix of the type or of one of its dotted parts, in
-- any case) read every entry's error list (detoasting it) to find its last error's type. The
-- index holds that type, so a filter reads the matching entries only: awa.dlq_error_types finds
-- the distinct types by a loose scan of it (one probe per type) and keeps those the prefix
-- matches, then the listing, count and bulk walk read the entries of those types from it (in
-- dlq_at order, as the list pages them). A plain prefix index (text_pattern_ops on lower(...))
-- would serve the start of the name but not of its dotted parts, which the filter also matches.
-- The kind filter does the same through dlq_entries_kind_dlq_at (migration 0001). Both indexes
-- are on awa.dlq_entries, written when a job is dead-lettered, never by enqueue, claim or close.
CREATE INDEX dlq_entries_error_type
    ON awa.dlq_entries ((coalesce(errors -> -1 ->> 'type', '(none)')), dlq_at, job_id);

-- The reason filter (three values, one of them usually nearly every entry): the entries of one
-- reason in dlq_at order, so a rare reason's page and count read only its entries.
CREATE INDEX dlq_entries_reason ON awa.dlq_entries (dlq_reason, dlq_at, job_id);

-- state=held walked every backlog row (mostly scheduled) down the primary key to find the few
-- workflow steps waiting for their dependencies. Partial: a scheduled or retryable row, the
-- backlog's common writes, only evaluates the predicate and adds no entry.
CREATE INDEX deferred_jobs_held ON awa.deferred_jobs (job_id) WHERE state = 'held';
