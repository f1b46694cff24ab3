-- Completion: closing a batch of attempts.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Closes a batch of attempts and returns the attempts it actually closed, with the time each
-- retried or snoozed one runs again. One statement closes them all (the closure rows, leases,
-- a completed job's saved state); a second runs only when one of them did not complete
-- (migration 0038): a batch of completions does not set up the plan of the backlog, the DLQ
-- and the state it would write (more than half the nodes of the one statement it was).
--
-- Guard (DESIGN.md §3 property 2): an item must match an existing receipt on
-- (job_id, run_lease), and the done_entries primary key lets only the first closer of an attempt
-- win. A completion for an older lease, or for an attempt already closed by rescue or cancel,
-- inserts nothing and is missing from the result: the caller reports it as stale.
-- Retryable and snoozed outcomes append the job to the deferred backlog in the same
-- transaction, carrying its body from the retained ready row. A retry appends this attempt's error to the
-- job's error list; a snooze gives the attempt back. A snooze that carries an error is a try
-- the worker could not run (no handler for the job's kind: awa_django.core.unknown_kinds): it
-- gives the attempt back too, but waits as retryable with its error recorded, replacing the
-- job's last entry when that one is a try of the same wait (it has waiting_since), so the
-- errors grow by one entry per wait. A closed attempt's lease (if it had one) is deleted; its
-- progress and checkpoint are saved for the next attempt, or deleted when the job completed. A job that ended (completed, failed, cancelled) while a session waits on it
-- is announced on channel awa_job_done, with its id as payload, when the transaction commits.
--
-- p_batch is a JSON array with one object per attempt: its receipt address (ready_slot, queue,
-- priority, shard, lane_seq, job_id, run_lease), outcome, delay_s (retryable and snoozed only:
-- seconds from now until the job runs again), error, progress and checkpoint (objects, or null
-- when the attempt reported none) and result (a completed attempt's return value as JSON text,
-- or null). One JSON document rather than one array per field: the worker serializes it in one
-- C call, where dumping thirteen arrays element by element cost it about 6 µs per completion.
-- The time a job runs again is the database's, so a worker whose clock is off schedules it
-- no differently: statement_timestamp(), the time of the closing statement, which is now() for
-- a worker (autocommit) and the current time inside a closer's longer transaction (an external
-- callback, a test), as run_at was when the 0.1.0 worker sent it. That run_at (an absolute
-- time, the 0.1.0 workers' form of delay_s) is still read when delay_s is missing.
-- Plans: as awa.claim_ready's, for the same reasons. Every ring row is read through a LATERAL
-- ... LIMIT 1 probe of its primary key, one per batch item: as a plain join, a generic plan
-- made while the ring was small hashed the batch against every retained receipt, so each
-- close cost more the longer the ring had run (1.8 ms for 100 completions at 2,000 retained
-- receipts, 4.4 ms at 18,000).
CREATE OR REPLACE FUNCTION awa.close_batch(p_batch json)
RETURNS TABLE (job_id bigint, run_lease bigint, run_at timestamptz) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    -- The attempts this call closed, and when each runs again.
    v_job_ids bigint[];
    v_leases bigint[];
    v_slots integer[];
    v_run_ats timestamptz[];
    -- Whether one of them did not complete: only those are requeued, dead-lettered or keep
    -- their state, in a statement of their own (migration 0038).
    v_uncompleted boolean;
BEGIN
    WITH batch AS (
        SELECT b.ready_slot, b.queue, b.priority, b.shard, b.lane_seq, b.job_id, b.run_lease,
               b.outcome,
               coalesce(statement_timestamp() + make_interval(secs => b.delay_s), b.run_at)
                 AS run_at,
               b.error, b.result::jsonb AS result
          FROM json_to_recordset(p_batch)
            AS b(ready_slot integer, queue text, priority smallint, shard smallint,
                 lane_seq bigint, job_id bigint, run_lease bigint, outcome text,
                 delay_s double precision, run_at timestamptz, error jsonb, result text)
    ), live AS (
        -- The receipt by attempt, through the job_id index (its lane columns come from it).
        SELECT b.ready_slot, c.queue, c.priority, c.shard, c.lane_seq, b.job_id, b.run_lease,
               b.outcome, b.run_at, b.error, b.result, c.attempt
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
                  done_entries.outcome
    ), released AS (
        DELETE FROM awa.leases x USING closed c
         WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
    ), forgotten AS (
        -- Probed per completed attempt only while some job has saved state (migration 0038):
        -- the EXISTS reads no column of the closed rows, so it runs once, in the statement's
        -- snapshot, as a gate above the probes, which finds exactly the rows they would.
        DELETE FROM awa.attempt_state s USING closed c
         WHERE s.job_id = c.job_id AND c.outcome = 'completed'
           AND EXISTS (SELECT 1 FROM awa.attempt_state)
    )
    SELECT array_agg(c.job_id), array_agg(c.run_lease), array_agg(c.ready_slot),
           array_agg(l.run_at), coalesce(bool_or(c.outcome <> 'completed'), false)
      INTO v_job_ids, v_leases, v_slots, v_run_ats, v_uncompleted
      FROM closed c
      JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease;
    -- The attempts that did not complete, of those this call closed (read back from their
    -- done rows, which the statement above wrote): a batch of completions, nearly every one,
    -- skips this statement, whose plan (the retained ready rows, the backlog, the DLQ, the
    -- queues' settings, the saved state) cost every close its set-up.
    IF v_uncompleted THEN
        WITH closed AS (
            SELECT d.job_id, d.run_lease, d.ready_slot, d.queue, d.priority, d.shard,
                   d.lane_seq, d.attempt, d.outcome
              FROM unnest(v_job_ids, v_leases, v_slots) AS x(job_id, run_lease, ready_slot)
              CROSS JOIN LATERAL (
                  SELECT d.* FROM awa.done_entries d
                   WHERE d.job_id = x.job_id AND d.run_lease = x.run_lease
                     AND d.ready_slot = x.ready_slot
                   LIMIT 1) d
             WHERE d.outcome <> 'completed'
        ), live AS (
            SELECT b.job_id, b.run_lease,
                   coalesce(statement_timestamp() + make_interval(secs => b.delay_s), b.run_at)
                     AS run_at,
                   b.error, b.progress, b.checkpoint
              FROM json_to_recordset(p_batch)
                AS b(job_id bigint, run_lease bigint, delay_s double precision,
                     run_at timestamptz, error jsonb, progress jsonb, checkpoint jsonb)
        ), body AS (
            -- The job of each retried, snoozed or failed attempt, from its retained ready row:
            -- what the backlog or the DLQ carries on.
            SELECT c.outcome, c.attempt, c.run_lease, l.run_at, l.error, r.job_id, r.kind,
                   r.queue, r.priority, r.args, r.max_attempts, r.created_at, r.metadata,
                   r.tags, r.errors
              FROM closed c
              JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
              CROSS JOIN LATERAL (
                  SELECT r.* FROM awa.ready_entries r
                   WHERE r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
                     AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
                   LIMIT 1) r
             WHERE c.outcome IN ('retryable', 'snoozed', 'failed')
        ), requeued AS (
            INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                           run_lease, max_attempts, run_at, created_at,
                                           metadata, tags, errors)
            SELECT b.job_id,
                   CASE WHEN b.outcome = 'retryable' OR b.error IS NOT NULL THEN 'retryable'
                        ELSE 'scheduled' END,
                   b.kind, b.queue, b.priority, b.args,
                   CASE b.outcome WHEN 'snoozed' THEN b.attempt - 1 ELSE b.attempt END,
                   b.run_lease, b.max_attempts, b.run_at, b.created_at, b.metadata, b.tags,
                   CASE WHEN b.outcome = 'snoozed' AND b.error IS NOT NULL
                             AND b.errors -> -1 -> 'waiting_since' IS NOT NULL
                        THEN (b.errors - (-1)) || jsonb_build_array(b.error)
                        WHEN b.outcome = 'retryable' OR b.error IS NOT NULL
                        THEN b.errors || jsonb_build_array(b.error)
                        ELSE b.errors END
              FROM body b
             WHERE b.outcome IN ('retryable', 'snoozed')
        ), dead AS (
            -- Terminal failures of DLQ-enabled queues are parked for an operator. Every closer
            -- (worker, rescue, cancel, callback timeout) goes through here, so all of them
            -- route.
            INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,
                                         original_run_lease, max_attempts, created_at, metadata,
                                         tags, errors, dlq_reason)
            SELECT b.job_id, b.kind, b.queue, b.priority, b.args, b.attempt, b.run_lease,
                   b.max_attempts, b.created_at, b.metadata, b.tags,
                   CASE WHEN b.error IS NULL THEN b.errors
                        ELSE b.errors || jsonb_build_array(b.error) END,
                   CASE WHEN b.attempt >= b.max_attempts THEN 'attempts_exhausted'
                        ELSE 'terminal_error' END
              FROM body b
              JOIN awa.queue_meta m ON m.queue = b.queue AND m.dlq_enabled
             WHERE b.outcome = 'failed'
            ON CONFLICT (job_id) DO NOTHING
        )
        INSERT INTO awa.attempt_state (job_id, run_lease, progress, checkpoint)
        SELECT c.job_id, c.run_lease, l.progress, l.checkpoint
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
         WHERE l.progress IS NOT NULL OR l.checkpoint IS NOT NULL
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = excluded.run_lease,
               progress = coalesce(excluded.progress, awa.attempt_state.progress),
               checkpoint = coalesce(excluded.checkpoint, awa.attempt_state.checkpoint),
               updated_at = now()
         WHERE awa.attempt_state.run_lease <= excluded.run_lease;
    END IF;
    RETURN QUERY
    SELECT x.job_id, x.run_lease, x.run_at
      FROM unnest(v_job_ids, v_leases, v_run_ats) AS x(job_id, run_lease, run_at);
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
    -- Workflow steps (functions/workflows.sql): their items carry "wf", so a batch of ordinary
    -- jobs pays one scan of its own text here and nothing more. A step's dependents are
    -- released, or cancelled, in this transaction. Its outcome is read back from its done row
    -- as for the waiters above; a flag seen in an error text only costs that read. "wf_id",
    -- the step's workflow as its metadata says (migration 0030), spares the lookup of the
    -- step before its workflow's lock; a worker that does not send it gets the lookup.
    IF strpos(p_batch::text, '"wf"') > 0 THEN
        PERFORM awa.workflow_steps_ended((
            SELECT jsonb_agg(jsonb_build_object('job_id', d.job_id, 'outcome', d.outcome,
                                                'error', d.error, 'result', d.result,
                                                'add', b.wf_add::jsonb,
                                                'workflow_id', b.wf_id)
                             ORDER BY d.job_id)
              FROM json_to_recordset(p_batch)
                AS b(ready_slot integer, job_id bigint, run_lease bigint, wf integer,
                     wf_add text, wf_id bigint)
              JOIN awa.done_entries d
                ON d.job_id = b.job_id AND d.run_lease = b.run_lease
               AND d.ready_slot = b.ready_slot
             WHERE b.wf IS NOT NULL));
    END IF;
END
$$;

-- The 0.1.0 form of awa.close_batch, without the times: 0.1.0 workers (whose batches carry run_at)
-- and awa.cancel_job call it.
CREATE OR REPLACE FUNCTION awa.close_attempts(p_batch json)
RETURNS TABLE (job_id bigint, run_lease bigint) LANGUAGE sql AS $$
    SELECT b.job_id, b.run_lease FROM awa.close_batch(p_batch) b
$$;
