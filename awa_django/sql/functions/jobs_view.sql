-- The awa.jobs read view.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- The jobs purged from the DLQ whose rows the ring still holds (awa.purged_jobs, migration
-- 0007). The view reads them through this function, not the table, because migration 0001
-- creates today's view before 0007 creates the table; being one plain SELECT, it is inlined
-- into the view's plan, which probes the table's primary key.
CREATE OR REPLACE FUNCTION awa.purged_job_ids() RETURNS SETOF bigint
LANGUAGE sql STABLE AS $$
    SELECT p.job_id FROM awa.purged_jobs p
$$;

-- Read surface: one row per job with its current state, hydrated from whichever table holds the
-- job's newest fact. Facts are ordered along a job's life by run_lease: a ready row waiting for
-- lease L+1 sits at 2L+1, its claim at 2(L+1), the closure just after, a deferred row after that.
CREATE OR REPLACE VIEW awa.jobs AS
WITH facts AS (
    SELECT r.job_id, 2 * r.run_lease + 1 AS position,
           CASE WHEN t.job_id IS NULL THEN 'available' ELSE 'cancelled' END AS state,
           r.kind, r.queue, r.priority, r.args, r.attempt, r.run_lease, r.max_attempts, r.run_at,
           r.created_at, r.metadata, r.tags,
           CASE WHEN t.job_id IS NULL THEN r.errors
                ELSE r.errors || jsonb_build_array(jsonb_build_object(
                         'attempt', r.attempt, 'at', t.created_at, 'reason', t.reason))
           END AS errors,
           t.created_at AS finalized_at,
           NULL::jsonb AS result
      FROM awa.ready_entries r
      LEFT JOIN awa.ready_tombstones t
        ON t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
       AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
    UNION ALL
    SELECT c.job_id, 2 * c.run_lease,
           -- An attempt with an unresumed callback waits on an outside system (docs/callbacks.md).
           CASE WHEN EXISTS (SELECT 1 FROM awa.leases x
                              WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
                                AND x.callback_id IS NOT NULL AND x.callback_resumed_at IS NULL)
                THEN 'waiting_external' ELSE 'running' END,
           r.kind, r.queue, r.priority, r.args, c.attempt,
           c.run_lease, r.max_attempts, r.run_at, r.created_at, r.metadata, r.tags, r.errors,
           NULL, NULL
      FROM awa.claim_receipts c
      JOIN awa.ready_entries r
        ON r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
       AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
    UNION ALL
    SELECT d.job_id, 2 * d.run_lease + 0.5, d.outcome, r.kind, r.queue, r.priority, r.args,
           d.attempt, d.run_lease, r.max_attempts, r.run_at, r.created_at, r.metadata, r.tags,
           CASE WHEN d.error IS NULL THEN r.errors ELSE r.errors || jsonb_build_array(d.error) END,
           d.finalized_at, d.result
      FROM awa.done_entries d
      JOIN awa.ready_entries r
        ON r.queue = d.queue AND r.priority = d.priority AND r.shard = d.shard
       AND r.lane_seq = d.lane_seq AND r.ready_slot = d.ready_slot
    UNION ALL
    SELECT f.job_id, 2 * f.run_lease + 0.75, f.state, f.kind, f.queue, f.priority, f.args,
           f.attempt, f.run_lease, f.max_attempts, f.run_at, f.created_at, f.metadata, f.tags,
           f.errors, NULL, NULL
      FROM awa.deferred_jobs f
    UNION ALL
    SELECT h.job_id, 2 * h.run_lease + 0.6, h.state, h.kind, h.queue, h.priority, h.args,
           h.attempt, h.run_lease, h.max_attempts, h.run_at, h.created_at, h.metadata, h.tags,
           h.errors, h.finalized_at, NULL
      FROM awa.terminal_history h
    UNION ALL
    SELECT q.job_id, 2 * q.original_run_lease + 0.9, 'dlq', q.kind, q.queue, q.priority, q.args,
           q.attempt, q.original_run_lease, q.max_attempts, NULL, q.created_at, q.metadata,
           q.tags, q.errors, q.dlq_at, NULL
      FROM awa.dlq_entries q
)
SELECT DISTINCT ON (job_id)
       job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at, result
  FROM facts
 -- A purged job is gone from every reading of it, whatever the ring still holds.
 WHERE NOT EXISTS (SELECT 1 FROM awa.purged_job_ids() p(job_id) WHERE p.job_id = facts.job_id)
 ORDER BY job_id, position DESC;
