-- Cancelling a job, whatever it is doing.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Cancels a job by id, whatever it is doing, and says what happened:
-- 'cancelled_running' (its open attempt is closed as cancelled and its worker told through
-- NOTIFY awa_cancel, so a late completion is stale), 'cancelled_queued' (a tombstone makes the
-- ready row unclaimable), 'cancelled_scheduled' (moved out of the backlog as a tombstoned ready
-- row), or 'not_cancellable' / 'not_found'. Sessions waiting on the job are told, as by
-- awa.close_batch, which closes a running attempt.
-- A queued job's lane claim lock is taken first: claimers skip a locked lane, so a claim cannot
-- slip in between our check and the tombstone.
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
    IF v_state = 'held' THEN
        -- A workflow step waiting for its dependencies (functions/workflows.sql): withdrawn
        -- under its workflow's lock, so a release cannot move it meanwhile; its dependents are
        -- cancelled in turn. Released in the meantime: cancelled below as any ready job.
        PERFORM awa.workflow_lock(s.workflow_id) FROM awa.workflow_steps s
         WHERE s.job_id = p_job_id;
        IF awa.workflow_withdraw(p_job_id, p_reason) THEN
            PERFORM awa.workflow_job_cancelled(p_job_id, p_reason);
            RETURN 'cancelled_scheduled';
        END IF;
        SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = p_job_id;
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
        PERFORM awa.workflow_job_cancelled(p_job_id, p_reason);
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
            PERFORM awa.workflow_job_cancelled(p_job_id, p_reason);
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
                -- The workflow flag (awa.close_batch): a cancel is rare, so it is always set.
                'wf', 1,
                'error', json_build_object('attempt', v_row.attempt, 'at', now(),
                                           'reason', p_reason))))) THEN
            PERFORM pg_notify('awa_cancel', v_row.job_id || ':' || v_row.run_lease);
            RETURN 'cancelled_running';
        END IF;
    END IF;
    RETURN 'not_cancellable';
END
$$;

-- Tells the sessions waiting on p_job_id (awa.job_waiters) that it ended, when the transaction
-- commits; nothing when nobody waits.
CREATE OR REPLACE FUNCTION awa.notify_job_waiters(p_job_id bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_notify('awa_job_done', p_job_id::text)
     WHERE EXISTS (SELECT 1 FROM awa.job_waiters w WHERE w.job_id = p_job_id)
$$;
