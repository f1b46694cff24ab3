-- Reverse of migration 0007_operator_console: awa.jobs, awa.prune_queue_ring and awa.promote_due
-- as they were before it (the definitions that read and clear awa.purged_jobs, and promote
-- through awa.ready_deferred), then run-now, the purge function, the error fingerprint, the
-- marker lookup and the marker table dropped, so that migration 0001's reverse finds only the
-- objects it created.
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
 ORDER BY job_id, position DESC;

CREATE OR REPLACE FUNCTION awa.prune_queue_ring(
    p_completed_retention_s double precision, p_failed_retention_s double precision,
    p_lock_timeout_ms integer
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_current record;
    v_slots integer;
    v_slot integer;
    v_blocker text;
    v_cutoff timestamptz := now() - make_interval(secs => p_failed_retention_s);
BEGIN
    IF NOT pg_try_advisory_xact_lock(1096237394, 1) THEN
        RETURN 'skipped_locked';
    END IF;
    SELECT r.generation, r.slot INTO v_current
      FROM awa.queue_ring_rotations r ORDER BY r.generation DESC LIMIT 1;
    SELECT slot_count INTO v_slots FROM awa.ring_config WHERE ring = 'queue';
    -- Slots after the current one, in ring order, are oldest first.
    FOR v_step IN 1 .. v_slots - 1 LOOP
        v_slot := (v_current.slot + v_step) % v_slots;
        EXIT WHEN awa.queue_slot_has_rows(v_slot);
        v_slot := NULL;
    END LOOP;
    IF v_slot IS NULL THEN
        RETURN 'nothing_to_prune';
    END IF;
    v_blocker := awa.queue_slot_blocker(v_slot, p_completed_retention_s);
    IF v_blocker IS NOT NULL THEN
        RETURN v_blocker;
    END IF;
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    BEGIN
        EXECUTE format('LOCK TABLE awa.%I, awa.%I, awa.%I, awa.%I, awa.%I '
                       'IN ACCESS EXCLUSIVE MODE',
                       'ready_entries_' || v_slot, 'lane_commits_' || v_slot,
                       'claim_receipts_' || v_slot, 'done_entries_' || v_slot,
                       'ready_tombstones_' || v_slot);
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_locked';
    END;
    v_blocker := awa.queue_slot_blocker(v_slot, p_completed_retention_s);
    IF v_blocker IS NOT NULL THEN
        RETURN v_blocker;
    END IF;

    -- Failed and cancelled jobs whose terminal fact is in this slot leave the ring as one
    -- hydrated row each, with their saved progress and checkpoint; the attempt state of every
    -- job that ends here is then released.
    INSERT INTO awa.terminal_history (job_id, run_lease, state, kind, queue, priority, args,
                                      attempt, max_attempts, run_at, created_at, metadata,
                                      tags, errors, progress, checkpoint, finalized_at)
    SELECT j.job_id, j.run_lease, j.state, j.kind, j.queue, j.priority, j.args, j.attempt,
           j.max_attempts, j.run_at, j.created_at, j.metadata, j.tags, j.errors, s.progress,
           s.checkpoint, j.finalized_at
      FROM awa.jobs j
      LEFT JOIN awa.attempt_state s ON s.job_id = j.job_id
     WHERE j.job_id IN (SELECT d.job_id FROM awa.done_entries d
                         WHERE d.ready_slot = v_slot AND d.outcome IN ('failed', 'cancelled')
                        UNION
                        SELECT t.job_id FROM awa.ready_tombstones t WHERE t.ready_slot = v_slot)
       AND j.state IN ('failed', 'cancelled') AND j.finalized_at > v_cutoff
    ON CONFLICT (job_id) DO NOTHING;
    DELETE FROM awa.attempt_state s
     WHERE s.job_id IN (SELECT d.job_id FROM awa.done_entries d
                         WHERE d.ready_slot = v_slot
                           AND d.outcome IN ('completed', 'failed', 'cancelled')
                        UNION
                        SELECT t.job_id FROM awa.ready_tombstones t WHERE t.ready_slot = v_slot);

    EXECUTE format('TRUNCATE awa.%I, awa.%I, awa.%I, awa.%I, awa.%I',
                   'ready_entries_' || v_slot, 'lane_commits_' || v_slot,
                   'claim_receipts_' || v_slot, 'done_entries_' || v_slot,
                   'ready_tombstones_' || v_slot);
    RETURN 'pruned';
END
$$;

CREATE OR REPLACE FUNCTION awa.promote_due(p_state text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
    v_seqs bigint[];
    v_slot record;
    v_moved integer;
BEGIN
    IF p_state = 'scheduled' THEN
        SELECT array_agg(d.job_id) INTO v_ids FROM (
            SELECT s.job_id FROM awa.deferred_jobs s
             WHERE s.state = 'scheduled' AND s.run_at <= now()
               AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m
                                WHERE m.queue = s.queue AND m.paused)
             ORDER BY s.run_at, s.job_id LIMIT p_limit FOR UPDATE SKIP LOCKED) d;
    ELSIF p_state = 'retryable' THEN
        SELECT array_agg(d.job_id) INTO v_ids FROM (
            SELECT s.job_id FROM awa.deferred_jobs s
             WHERE s.state = 'retryable' AND s.run_at <= now()
               AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m
                                WHERE m.queue = s.queue AND m.paused)
             ORDER BY s.run_at, s.job_id LIMIT p_limit FOR UPDATE SKIP LOCKED) d;
    ELSE
        RAISE EXCEPTION 'unknown deferred state %', p_state;
    END IF;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    v_slot := awa.producer_slot();
    -- Increasing, and handed out in (lane, run_at, job_id) order below: each lane's rows are
    -- numbered by run_at, and its announcing row has the lowest number of them.
    v_seqs := ARRAY(SELECT nextval('awa.lane_seq') FROM generate_series(1, cardinality(v_ids)));
    WITH moved AS (
        DELETE FROM awa.deferred_jobs d WHERE d.job_id = ANY (v_ids)
        RETURNING d.*, awa.reentry_shard(d.queue, d.metadata) AS shard
    ), numbered AS (
        SELECT m.*,
               row_number() OVER (ORDER BY m.queue, m.priority, m.shard, m.run_at, m.job_id)
                   AS position,
               row_number() OVER (PARTITION BY m.queue, m.priority, m.shard
                                  ORDER BY m.run_at, m.job_id) = 1 AS announce
          FROM moved m
    )
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                   ready_generation, job_id, kind, args, attempt, run_lease,
                                   max_attempts, run_at, created_at, metadata, tags, errors,
                                   announce)
    SELECT n.queue, n.priority, n.shard, v_seqs[n.position], v_slot.slot, v_slot.generation,
           n.job_id, n.kind, n.args, n.attempt, n.run_lease, n.max_attempts, n.run_at,
           n.created_at, n.metadata, n.tags, n.errors, n.announce
      FROM numbered n;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END
$$;

DROP FUNCTION awa.run_now(bigint[]);
DROP FUNCTION awa.ready_deferred(bigint[]);
DROP FUNCTION awa.dlq_purge(bigint[]);
DROP FUNCTION awa.error_fingerprint(text);
DROP FUNCTION awa.purged_job_ids();
DROP TABLE awa.purged_jobs;
