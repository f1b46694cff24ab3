-- Reverse of 0037_enqueue_server: awa.publish_ready, awa.list_lane and awa.enqueue_job_alone
-- as 0036 left them (the lanes to publish in four settings, the autocommit enqueue's slot, row
-- and publication in three statements).

CREATE OR REPLACE FUNCTION awa.publish_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- The lane's commit sequence, and its key in awa.published.
    v_lane constant text := awa.lane_sequence_name(NEW.queue, NEW.priority, NEW.shard);
    v_published text := coalesce(current_setting('awa.published', true), '');
    v_at constant integer := position(';' || v_lane || '=' IN v_published);
    -- The lanes to publish, as awa.enqueue_job lists them, this row's among them.
    v_queues text[];
    v_priorities smallint[];
    v_shards smallint[];
    v_last_seq bigint;
    v_written record;
BEGIN
    -- The newest entry of a lane comes first (entries are prepended below).
    IF v_at > 0 AND NEW.lane_seq <= split_part(split_part(substr(v_published, v_at + 1), ';', 1),
                                               '=', 2)::bigint THEN
        RETURN NULL;
    END IF;
    v_queues := coalesce(nullif(current_setting('awa.unpublished_queues', true), ''), '{}');
    v_priorities := coalesce(nullif(current_setting('awa.unpublished_priorities', true), ''),
                             '{}');
    v_shards := coalesce(nullif(current_setting('awa.unpublished_shards', true), ''), '{}');
    IF position(json_build_array(NEW.queue, NEW.priority, NEW.shard)::text
                IN coalesce(current_setting('awa.unpublished', true), '')) = 0 THEN
        v_queues := v_queues || NEW.queue;
        v_priorities := v_priorities || NEW.priority;
        v_shards := v_shards || NEW.shard;
    END IF;
    -- Every row this transaction wrote took its lane_seq from this session before now.
    v_last_seq := currval('awa.lane_seq');
    BEGIN
        -- A loop over the rows the INSERT returns, which PL/pgSQL's INTO cannot take: its body
        -- is assignments, evaluated without an executor run, and a NOTIFY while a worker waits.
        FOR v_written IN
            INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                          first_seq, last_seq)
            SELECT l.queue, l.priority, l.shard,
                   nextval(coalesce(to_regclass('awa.' || l.name),
                                    awa.create_lane(l.queue, l.priority, l.shard))),
                   NEW.ready_slot, NEW.batch, NEW.lane_seq, v_last_seq
              -- Each lane's lock before its position: a drawn position is always covered by it.
              FROM (SELECT e.queue, e.priority, e.shard,
                           awa.lane_sequence_name(e.queue, e.priority, e.shard) AS name,
                           pg_advisory_xact_lock_shared(
                               1096237388, awa.lane_lock_key(e.queue, e.priority, e.shard))
                      FROM unnest(v_queues, v_priorities, v_shards) AS e(queue, priority, shard)
                    OFFSET 0) AS l
            RETURNING queue, priority, shard,
                      pg_try_advisory_xact_lock_shared(1096237385, hashtext(queue)) AS unwatched
        LOOP
            v_published := ';' || awa.lane_sequence_name(v_written.queue, v_written.priority,
                                                         v_written.shard)
                           || '=' || v_last_seq || v_published;
            IF NOT v_written.unwatched THEN
                PERFORM pg_notify('awa', v_written.queue);
            END IF;
        END LOOP;
        v_published := set_config('awa.published', v_published, true);
        v_published := set_config('awa.unpublished', '', true);
        v_published := set_config('awa.unpublished_queues', '', true);
        v_published := set_config('awa.unpublished_priorities', '', true);
        v_published := set_config('awa.unpublished_shards', '', true);
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'awa: could not publish job % of queue % at commit: %', NEW.job_id,
                        NEW.queue, SQLERRM
              USING ERRCODE = SQLSTATE;
    END;
    RETURN NULL;
END
$$;


CREATE OR REPLACE FUNCTION awa.list_lane(p_queue text, p_priority smallint, p_shard smallint)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_lane constant text := json_build_array(p_queue, p_priority, p_shard)::text;
    v_unpublished text := coalesce(current_setting('awa.unpublished', true), '');
BEGIN
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
                      '{}')::smallint[] || p_shard)::text, true);
        RETURN true;
    END IF;
    RETURN false;
END
$$;


CREATE OR REPLACE FUNCTION awa.enqueue_job_alone(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
    v_lane_seq bigint;
    v_shard smallint;
    v_slot record;
    -- The lane's commit sequence and producer lock key, worked out before the INSERT as
    -- awa.publish_ready does: a plan of the INSERT for this row's values would run the
    -- functions to fold them, each one more statement.
    v_lane text;
    v_lock_key integer;
    v_unwatched boolean;  -- no worker waits for the queue: no NOTIFY
BEGIN
    IF (p_run_at IS NOT NULL AND p_run_at > now())
       OR pg_current_xact_id_if_assigned() IS NOT NULL
       OR coalesce(current_setting('awa.producer_slot', true), '') <> '' THEN
        -- Scheduled (nothing to publish), or not the transaction's first write or reservation.
        RETURN awa.enqueue_job(p_kind, p_queue, p_priority, p_args, p_max_attempts, p_run_at,
                               p_metadata, p_tags);
    END IF;
    v_job_id := nextval('awa.job_id_seq');
    v_lane_seq := nextval('awa.lane_seq');
    v_shard := awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key');
    v_slot := awa.producer_slot();
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, v_shard, v_lane_seq, v_slot.slot, v_slot.generation, v_job_id,
            p_kind, p_args, 0, 0, p_max_attempts, coalesce(p_run_at, now()), now(), p_metadata,
            p_tags, '[]', false);
    -- As awa.publish_ready, in one statement (migration 0031): the lock before the position
    -- (taken in a subquery that is not flattened, so its row comes before the draw), the
    -- wake lock's test after it (RETURNING runs once the row is written).
    v_lane := awa.lane_sequence_name(p_queue, p_priority, v_shard);
    v_lock_key := awa.lane_lock_key(p_queue, p_priority, v_shard);
    INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                  first_seq, last_seq)
    SELECT p_queue, p_priority, v_shard,
           nextval(coalesce(to_regclass('awa.' || v_lane),
                            awa.create_lane(p_queue, p_priority, v_shard))),
           v_slot.slot, pg_current_xact_id(), v_lane_seq, v_lane_seq
      FROM (SELECT pg_advisory_xact_lock_shared(1096237388, v_lock_key) OFFSET 0) AS lane_lock
    RETURNING pg_try_advisory_xact_lock_shared(1096237385, hashtext(p_queue)) INTO v_unwatched;
    IF NOT v_unwatched THEN
        PERFORM pg_notify('awa', p_queue);
    END IF;
    RETURN v_job_id;
END
$$;
