-- Reverse of 0036_bulk_cost: awa.enqueue_job as 0035 left it (the lane listed inline), and no
-- awa.list_lane.

-- Enqueues one job inside the caller's transaction and returns its id. A future run_at goes to
-- the deferred backlog; anything else is appended to its lane as an immutable ready row, which
-- the transaction publishes when it commits (awa.publish_ready). Nothing here waits for, or
-- locks against, another producer.
-- The lane goes on the transaction's list of lanes to publish (migration 0036, #32), so the
-- commit's first firing publishes every lane in one statement: awa.unpublished_queues,
-- _priorities and _shards hold the lanes as three arrays, which that statement unnests, and
-- awa.unpublished each lane's key, [queue, priority, shard] as JSON, by which a lane already
-- listed is found. A JSON string cannot hold an unescaped quote, so '["' only ever starts a
-- key. A lane is listed once per transaction: its later jobs only look it up.
CREATE OR REPLACE FUNCTION awa.enqueue_job(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint := nextval('awa.job_id_seq');
    v_slot record;
    v_shard smallint;
    v_lane text;
    v_unpublished text;
BEGIN
    IF p_run_at IS NOT NULL AND p_run_at > now() THEN
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        VALUES (v_job_id, 'scheduled', p_kind, p_queue, p_priority, p_args, 0, 0, p_max_attempts,
                p_run_at, now(), p_metadata, p_tags, '[]');
        RETURN v_job_id;
    END IF;
    v_slot := awa.producer_slot();
    v_shard := awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key');
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, v_shard, nextval('awa.lane_seq'), v_slot.slot,
            v_slot.generation, v_job_id, p_kind, p_args, 0, 0, p_max_attempts,
            coalesce(p_run_at, now()), now(), p_metadata, p_tags, '[]', true);
    -- Assignments, not statements: PL/pgSQL evaluates them without an executor run.
    v_lane := json_build_array(p_queue, p_priority, v_shard)::text;
    v_unpublished := coalesce(current_setting('awa.unpublished', true), '');
    IF position(v_lane IN v_unpublished) = 0 THEN
        v_unpublished := set_config('awa.unpublished', v_unpublished || v_lane, true);
        v_unpublished := set_config(
            'awa.unpublished_queues',
            (coalesce(nullif(current_setting('awa.unpublished_queues', true), ''), '{}')::text[]
             || p_queue)::text, true);
        v_unpublished := set_config(
            'awa.unpublished_priorities',
            (coalesce(nullif(current_setting('awa.unpublished_priorities', true), ''),
                      '{}')::smallint[] || p_priority)::text, true);
        v_unpublished := set_config(
            'awa.unpublished_shards',
            (coalesce(nullif(current_setting('awa.unpublished_shards', true), ''),
                      '{}')::smallint[] || v_shard)::text, true);
    END IF;
    RETURN v_job_id;
END
$$;

DROP FUNCTION awa.list_lane(text, smallint, smallint);
