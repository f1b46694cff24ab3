-- Indexes for the operator console's kind and queue filters (docs/admin.md, "Large tables"): one
-- plain btree on (queue, kind, job_id) on each table that holds a job's names and that the job
-- listings walk. A filtered listing first finds the (queue, kind) pairs that exist by skipping
-- through the index one pair at a time, keeps those whose names match the case-insensitive
-- prefixes, then walks each kept pair's job ids newest first from the page's cursor. No
-- expression index: an enqueue pays one more plain insert, with no lower() per row.
--
-- On the partitioned ready_entries the index is declared on the parent, so every partition has
-- it, including any partition created later (CREATE TABLE ... PARTITION OF builds the parent's
-- indexes). Building it takes a SHARE lock on each table (writes wait, reads go on) for as long
-- as the build lasts: CREATE INDEX CONCURRENTLY cannot run on a partitioned table, nor inside
-- the transaction a migration runs in.
CREATE INDEX ready_entries_queue_kind_job_id ON awa.ready_entries (queue, kind, job_id);

CREATE INDEX deferred_jobs_queue_kind_job_id ON awa.deferred_jobs (queue, kind, job_id);

CREATE INDEX terminal_history_queue_kind_job_id ON awa.terminal_history (queue, kind, job_id);

CREATE INDEX dlq_entries_queue_kind_job_id ON awa.dlq_entries (queue, kind, job_id);
