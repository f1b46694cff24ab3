-- Reverse of migration 0012_unknown_kinds: awa.close_batch as it was before it (a snooze never
-- recorded an error), and the index of the jobs no worker knew dropped, so that migration
-- 0001's reverse finds only the objects it created.
CREATE OR REPLACE FUNCTION awa.close_batch(p_batch json)
RETURNS TABLE (job_id bigint, run_lease bigint, run_at timestamptz) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH batch AS (
        SELECT b.ready_slot, b.queue, b.priority, b.shard, b.lane_seq, b.job_id, b.run_lease,
               b.outcome,
               coalesce(statement_timestamp() + make_interval(secs => b.delay_s), b.run_at)
                 AS run_at,
               b.error, b.progress, b.checkpoint, b.result::jsonb AS result
          FROM json_to_recordset(p_batch)
            AS b(ready_slot integer, queue text, priority smallint, shard smallint,
                 lane_seq bigint, job_id bigint, run_lease bigint, outcome text,
                 delay_s double precision, run_at timestamptz, error jsonb, progress jsonb,
                 checkpoint jsonb, result text)
    ), live AS (
        -- The receipt by attempt, through the job_id index (its lane columns come from it).
        SELECT b.ready_slot, c.queue, c.priority, c.shard, c.lane_seq, b.job_id, b.run_lease,
               b.outcome, b.run_at, b.error, b.progress, b.checkpoint, b.result, c.attempt
          FROM batch b
          CROSS JOIN LATERAL (
              SELECT c.queue, c.priority, c.shard, c.lane_seq, c.attempt
                FROM awa.claim_receipts c
               WHERE c.job_id = b.job_id AND c.run_lease = b.run_lease
                 AND c.ready_slot = b.ready_slot
               LIMIT 1) c
    ), closed AS (
        INSERT INTO awa.done_entries (job_id, run_lease, ready_slot, queue, priority, shard,
                                      lane_seq, attempt, outcome, error, result)
        SELECT l.job_id, l.run_lease, l.ready_slot, l.queue, l.priority, l.shard, l.lane_seq,
               l.attempt, l.outcome, l.error, l.result
          FROM live l
        ON CONFLICT DO NOTHING
        RETURNING done_entries.job_id, done_entries.run_lease, done_entries.ready_slot,
                  done_entries.queue, done_entries.priority, done_entries.shard,
                  done_entries.lane_seq, done_entries.attempt, done_entries.outcome
    ), requeued AS (
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        SELECT r.job_id,
               CASE c.outcome WHEN 'retryable' THEN 'retryable' ELSE 'scheduled' END,
               r.kind, r.queue, r.priority, r.args,
               CASE c.outcome WHEN 'snoozed' THEN c.attempt - 1 ELSE c.attempt END,
               c.run_lease, r.max_attempts, l.run_at, r.created_at, r.metadata, r.tags,
               CASE c.outcome WHEN 'retryable' THEN r.errors || jsonb_build_array(l.error)
                              ELSE r.errors END
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
          CROSS JOIN LATERAL (
              SELECT r.* FROM awa.ready_entries r
               WHERE r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
                 AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
               LIMIT 1) r
         WHERE c.outcome IN ('retryable', 'snoozed')
    ), dead AS (
        -- Terminal failures of DLQ-enabled queues are parked for an operator. Every closer
        -- (worker, rescue, cancel, callback timeout) goes through here, so all of them route.
        INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,
                                     original_run_lease, max_attempts, created_at, metadata,
                                     tags, errors, dlq_reason)
        SELECT r.job_id, r.kind, r.queue, r.priority, r.args, c.attempt, c.run_lease,
               r.max_attempts, r.created_at, r.metadata, r.tags,
               CASE WHEN l.error IS NULL THEN r.errors ELSE r.errors || jsonb_build_array(l.error)
               END,
               CASE WHEN c.attempt >= r.max_attempts THEN 'attempts_exhausted'
                    ELSE 'terminal_error' END
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
          CROSS JOIN LATERAL (
              SELECT r.* FROM awa.ready_entries r
               WHERE r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
                 AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
               LIMIT 1) r
          JOIN awa.queue_meta m ON m.queue = c.queue AND m.dlq_enabled
         WHERE c.outcome = 'failed'
        ON CONFLICT (job_id) DO NOTHING
    ), released AS (
        DELETE FROM awa.leases x USING closed c
         WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
    ), forgotten AS (
        DELETE FROM awa.attempt_state s USING closed c
         WHERE s.job_id = c.job_id AND c.outcome = 'completed'
    ), saved AS (
        INSERT INTO awa.attempt_state (job_id, run_lease, progress, checkpoint)
        SELECT c.job_id, c.run_lease, l.progress, l.checkpoint
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
         WHERE c.outcome <> 'completed' AND (l.progress IS NOT NULL OR l.checkpoint IS NOT NULL)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = excluded.run_lease,
               progress = coalesce(excluded.progress, awa.attempt_state.progress),
               checkpoint = coalesce(excluded.checkpoint, awa.attempt_state.checkpoint),
               updated_at = now()
         WHERE awa.attempt_state.run_lease <= excluded.run_lease
    )
    SELECT c.job_id, c.run_lease, l.run_at
      FROM closed c
      JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease;
    -- Tells the sessions waiting on a job (awa.job_waiters) that it ended. The table is empty
    -- unless someone waits, so a close that nobody waits on pays this one probe: a statement of
    -- its own, as a CTE of the one above cost more even when it found nobody. The attempts are
    -- read back from their done rows, which the statement above wrote (an attempt a rescue or
    -- cancel had closed first is announced again: its waiter only reads the state once more).
    IF EXISTS (SELECT 1 FROM awa.job_waiters) THEN
        PERFORM pg_notify('awa_job_done', d.job_id::text)
           FROM json_to_recordset(p_batch)
             AS b(ready_slot integer, job_id bigint, run_lease bigint)
           JOIN awa.done_entries d
             ON d.job_id = b.job_id AND d.run_lease = b.run_lease AND d.ready_slot = b.ready_slot
          WHERE d.outcome IN ('completed', 'failed', 'cancelled')
            AND EXISTS (SELECT 1 FROM awa.job_waiters w WHERE w.job_id = d.job_id);
    END IF;
END
$$;

DROP INDEX awa.deferred_jobs_unknown_kind;
