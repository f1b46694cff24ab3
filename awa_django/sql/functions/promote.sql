-- Promotion of due scheduled and retryable jobs into the ready ring.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Moves the given deferred jobs into the ready ring and returns their ids; the caller has
-- locked their rows. Job id, attempt and run_lease are kept; a run_at still ahead (a job run
-- early by awa.run_now) becomes now. Each lane's rows are written in (run_at, job_id) order,
-- the first one announcing them, so the moving transaction publishes them at the back of
-- their lane when it commits, like any producer's.
CREATE OR REPLACE FUNCTION awa.ready_deferred(p_job_ids bigint[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    v_seqs bigint[];
    v_slot record;
BEGIN
    v_slot := awa.producer_slot();
    -- Increasing, and handed out in (lane, run_at, job_id) order below: each lane's rows are
    -- numbered by run_at, and its announcing row has the lowest number of them.
    v_seqs := ARRAY(SELECT nextval('awa.lane_seq')
                      FROM generate_series(1, cardinality(p_job_ids)));
    RETURN QUERY
    WITH moved AS (
        DELETE FROM awa.deferred_jobs d WHERE d.job_id = ANY (p_job_ids)
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
           n.job_id, n.kind, n.args, n.attempt, n.run_lease, n.max_attempts,
           least(n.run_at, now()), n.created_at, n.metadata, n.tags, n.errors, n.announce
      FROM numbered n
    RETURNING job_id;
END
$$;

-- Runs scheduled and retryable jobs now, whatever their run_at, and returns the ids it moved
-- into the ready ring. A job in another state, or whose row a promoter or cancel holds right
-- now (SKIP LOCKED), is left alone. A job of a paused queue waits in its lane until resumed,
-- as a promoted one would.
CREATE OR REPLACE FUNCTION awa.run_now(p_job_ids bigint[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
BEGIN
    SELECT array_agg(d.job_id) INTO v_ids FROM (
        SELECT s.job_id FROM awa.deferred_jobs s
         WHERE s.job_id = ANY (p_job_ids) AND s.state IN ('scheduled', 'retryable')
         ORDER BY s.job_id FOR UPDATE SKIP LOCKED) d;
    IF v_ids IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT r.job_id FROM awa.ready_deferred(v_ids) AS r(job_id) ORDER BY 1;
END
$$;

-- Moves due deferred jobs of one state into the ready ring (awa.ready_deferred), at most
-- p_limit per call, and returns how many moved.
--
-- Locks: deferred rows FOR UPDATE SKIP LOCKED, so concurrent promoters split the backlog;
-- nothing else is waited for (lanes take no lock until commit). The state is a parameter of
-- this function but a literal in each query below, so the partial indexes are chosen.
CREATE OR REPLACE FUNCTION awa.promote_due(p_state text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
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
    SELECT count(*) INTO v_moved FROM awa.ready_deferred(v_ids);
    RETURN v_moved;
END
$$;
