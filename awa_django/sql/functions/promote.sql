-- Promotion of due scheduled and retryable jobs into the ready ring.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Moves due deferred jobs of one state into the ready ring, at most p_limit per call, and
-- returns how many moved. Job id, attempt and run_lease are kept. Each lane's rows are written in
-- (run_at, job_id) order, the first one announcing them, so the promoting transaction publishes
-- them at the back of their lane when it commits, like any producer's.
--
-- Locks: deferred rows FOR UPDATE SKIP LOCKED, so concurrent promoters split the backlog;
-- nothing else is waited for (lanes take no lock until commit). The state is a parameter of
-- this function but a literal in each query below, so the partial indexes are chosen.
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
