-- Reverse of migration 0013_workflows: held steps can no longer run, so their rows go with the
-- workflow tables; awa.close_batch and awa.cancel_job are restored as 0012 left them.
DROP TRIGGER IF EXISTS workflow_dead_letter_gone ON awa.dlq_entries;
DROP FUNCTION IF EXISTS awa.workflow_dead_letter_gone();
DROP FUNCTION IF EXISTS awa.workflow_create(jsonb);
DROP FUNCTION IF EXISTS awa.workflow_graft(bigint, text, jsonb);
DROP FUNCTION IF EXISTS awa.workflow_release(bigint[]);
DROP FUNCTION IF EXISTS awa.workflow_withdraw(bigint, text);
DROP FUNCTION IF EXISTS awa.workflow_lock(bigint);
DROP FUNCTION IF EXISTS awa.workflow_steps_ended(jsonb);
DROP FUNCTION IF EXISTS awa.workflow_finish(bigint);
DROP FUNCTION IF EXISTS awa.workflow_cancel(bigint, text);
DROP FUNCTION IF EXISTS awa.workflow_prune(double precision, double precision, integer);
DROP FUNCTION IF EXISTS awa.workflow_job_cancelled(bigint, text);
DELETE FROM awa.deferred_jobs WHERE state = 'held';
ALTER TABLE awa.deferred_jobs DROP CONSTRAINT deferred_jobs_state_check;
ALTER TABLE awa.deferred_jobs ADD CONSTRAINT deferred_jobs_state_check
    CHECK (state IN ('scheduled', 'retryable'));
DROP TABLE awa.workflow_edges, awa.workflow_steps, awa.workflows;
DROP SEQUENCE awa.workflow_id_seq;
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
               CASE WHEN c.outcome = 'retryable' OR l.error IS NOT NULL THEN 'retryable'
                    ELSE 'scheduled' END,
               r.kind, r.queue, r.priority, r.args,
               CASE c.outcome WHEN 'snoozed' THEN c.attempt - 1 ELSE c.attempt END,
               c.run_lease, r.max_attempts, l.run_at, r.created_at, r.metadata, r.tags,
               CASE WHEN c.outcome = 'snoozed' AND l.error IS NOT NULL
                         AND r.errors -> -1 -> 'waiting_since' IS NOT NULL
                    THEN (r.errors - (-1)) || jsonb_build_array(l.error)
                    WHEN c.outcome = 'retryable' OR l.error IS NOT NULL
                    THEN r.errors || jsonb_build_array(l.error)
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
CREATE OR REPLACE FUNCTION awa.cancel_job(p_job_id bigint, p_reason text) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    v_state text;
    v_row record;
    v_lane record;
    v_seq bigint;
BEGIN
    SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = p_job_id;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    IF v_state IN ('scheduled', 'retryable') THEN
        DELETE FROM awa.deferred_jobs d WHERE d.job_id = p_job_id RETURNING d.* INTO v_row;
        IF NOT FOUND THEN
            -- Promoted while we waited for its row lock: the job is now in the ready ring (a
            -- fresh statement sees the promoter's commit), so cancel it there.
            SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = p_job_id;
        END IF;
    END IF;
    IF v_state IN ('scheduled', 'retryable') THEN
        -- A ready row that is never published (it does not announce) and is tombstoned at
        -- once: it only records the job as cancelled, in the ring its history is read from.
        v_lane := awa.producer_slot();
        v_seq := nextval('awa.lane_seq');
        INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                       ready_generation, job_id, kind, args, attempt, run_lease,
                                       max_attempts, run_at, created_at, metadata, tags, errors)
        VALUES (v_row.queue, v_row.priority, 0, v_seq, v_lane.slot, v_lane.generation,
                v_row.job_id, v_row.kind, v_row.args, v_row.attempt, v_row.run_lease,
                v_row.max_attempts, v_row.run_at, v_row.created_at, v_row.metadata, v_row.tags,
                v_row.errors);
        INSERT INTO awa.ready_tombstones (queue, priority, shard, lane_seq, ready_slot, job_id,
                                          reason)
        VALUES (v_row.queue, v_row.priority, 0, v_seq, v_lane.slot, p_job_id, p_reason);
        PERFORM awa.notify_job_waiters(p_job_id);
        RETURN 'cancelled_scheduled';
    END IF;
    IF v_state = 'available' THEN
        SELECT r.* INTO v_row FROM awa.ready_entries r
         WHERE r.job_id = p_job_id ORDER BY r.run_lease DESC LIMIT 1;
        PERFORM pg_advisory_xact_lock(
            1096237379, awa.lane_lock_key(v_row.queue, v_row.priority, v_row.shard));
        IF NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                        WHERE c.job_id = p_job_id AND c.run_lease = v_row.run_lease + 1
                          AND c.ready_slot = v_row.ready_slot) THEN
            INSERT INTO awa.ready_tombstones (queue, priority, shard, lane_seq, ready_slot,
                                              job_id, reason)
            VALUES (v_row.queue, v_row.priority, v_row.shard, v_row.lane_seq, v_row.ready_slot,
                    p_job_id, p_reason)
            ON CONFLICT DO NOTHING;
            PERFORM awa.notify_job_waiters(p_job_id);
            RETURN 'cancelled_queued';
        END IF;
        -- Claimed after all: fall through to the running case.
    END IF;
    SELECT c.* INTO v_row FROM awa.claim_receipts c
     WHERE c.job_id = p_job_id ORDER BY c.run_lease DESC LIMIT 1;
    IF FOUND AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                              WHERE d.job_id = v_row.job_id AND d.run_lease = v_row.run_lease
                                AND d.ready_slot = v_row.ready_slot) THEN
        IF EXISTS (SELECT 1 FROM awa.close_attempts(json_build_array(json_build_object(
                'ready_slot', v_row.ready_slot, 'queue', v_row.queue,
                'priority', v_row.priority, 'shard', v_row.shard, 'lane_seq', v_row.lane_seq,
                'job_id', v_row.job_id, 'run_lease', v_row.run_lease, 'outcome', 'cancelled',
                'error', json_build_object('attempt', v_row.attempt, 'at', now(),
                                           'reason', p_reason))))) THEN
            PERFORM pg_notify('awa_cancel', v_row.job_id || ':' || v_row.run_lease);
            RETURN 'cancelled_running';
        END IF;
    END IF;
    RETURN 'not_cancellable';
END
$$;
