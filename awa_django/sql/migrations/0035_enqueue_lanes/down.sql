-- Reverse of 0035_enqueue_lanes: awa.publish_ready and awa.enqueue_job as 0031 left them, a
-- commit publishing each lane with a statement of its own and no list of the lanes written.

CREATE OR REPLACE FUNCTION awa.publish_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- The lane's commit sequence, and its key in awa.published.
    v_lane constant text := awa.lane_sequence_name(NEW.queue, NEW.priority, NEW.shard);
    -- Its producer lock's key, worked out here rather than in the INSERT: a plan of the INSERT
    -- for this row's values would run the function to fold it, one more statement.
    v_lock_key constant integer := awa.lane_lock_key(NEW.queue, NEW.priority, NEW.shard);
    v_published constant text := coalesce(current_setting('awa.published', true), '');
    v_at constant integer := position(';' || v_lane || '=' IN v_published);
    v_entry text;
    v_last_seq bigint;
    v_unwatched boolean;  -- no worker waits for the queue: no NOTIFY
    v_recorded text;
BEGIN
    IF v_at > 0 THEN
        v_entry := split_part(substr(v_published, v_at + 1), ';', 1);
        IF NEW.lane_seq <= split_part(v_entry, '=', 2)::bigint THEN
            RETURN NULL;
        END IF;
    END IF;
    -- Every row this transaction wrote took its lane_seq from this session before now.
    v_last_seq := currval('awa.lane_seq');
    BEGIN
        INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                      first_seq, last_seq)
        SELECT NEW.queue, NEW.priority, NEW.shard,
               nextval(coalesce(to_regclass('awa.' || v_lane),
                                awa.create_lane(NEW.queue, NEW.priority, NEW.shard))),
               NEW.ready_slot, NEW.batch, NEW.lane_seq, v_last_seq
          -- The lock before the position: a drawn position is always covered by it.
          FROM (SELECT pg_advisory_xact_lock_shared(1096237388, v_lock_key) OFFSET 0) AS lane_lock
        RETURNING pg_try_advisory_xact_lock_shared(1096237385, hashtext(NEW.queue)),
                  set_config('awa.published',
                             CASE WHEN v_at > 0
                                  THEN replace(v_published, ';' || v_entry,
                                               ';' || v_lane || '=' || v_last_seq)
                                  ELSE v_published || ';' || v_lane || '=' || v_last_seq END,
                             true)
             INTO v_unwatched, v_recorded;
        IF NOT v_unwatched THEN
            PERFORM pg_notify('awa', NEW.queue);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'awa: could not publish job % of queue % at commit: %', NEW.job_id,
                        NEW.queue, SQLERRM
              USING ERRCODE = SQLSTATE;
    END;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION awa.enqueue_job(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint := nextval('awa.job_id_seq');
    v_slot record;
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
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key'),
            nextval('awa.lane_seq'), v_slot.slot, v_slot.generation, v_job_id, p_kind, p_args, 0,
            0, p_max_attempts, coalesce(p_run_at, now()), now(), p_metadata, p_tags, '[]', true);
    RETURN v_job_id;
END
$$;
