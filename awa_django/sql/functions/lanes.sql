-- Lanes: their lock keys, their commit sequences and the ring slot a producer writes to.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- The object key of a lane's advisory locks. Producers take it in class 1096237388 ('AWAL')
-- while they publish (shared: producers never wait for each other), claimers (and cancel_job)
-- in class 1096237379 ('AWAC'), and neither collides with an application's keys. Two lanes
-- whose names hash alike merely share their locks.
-- The explicit ::text casts keep the body immutable (text || smallint is only stable), so the
-- planner inlines it; a call it cannot inline re-parses and re-plans the body in every
-- transaction.
CREATE OR REPLACE FUNCTION awa.lane_lock_key(p_queue text, p_priority smallint, p_shard smallint)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtext(p_queue || '/' || p_priority::text || '/' || p_shard::text)
$$;

-- The name of a lane's commit sequence: derived from the lane, so producers find it in the
-- catalog (whose lookups see every committed object, whatever the caller's isolation level)
-- without reading a table row their snapshot might not show yet.
CREATE OR REPLACE FUNCTION awa.lane_sequence_name(p_queue text, p_priority smallint, p_shard smallint)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'lane_' || md5(p_queue || '/' || p_priority::text || '/' || p_shard::text)
$$;

-- Creates a lane: its queue_lanes row and its commit sequence, and returns the sequence.
-- Producers that enqueue through awa_django's Python API have it called by awa.ensure_lanes,
-- on a connection and in a transaction of their own, before their first job of the lane (see
-- docs/architecture.md, "Lanes are created outside producers' transactions"); awa.publish_ready
-- calls it in the producer's transaction only for a lane that does not exist yet at commit (an
-- enqueue in raw SQL, a promotion, a lane dropped by awa.reset_all).
-- Creators of one lane take turns on the lane's creation lock, class 1096237390 ('AWAN'), so
-- concurrent first uses of one lane wait for each other instead of failing; creators of two
-- lanes never wait for each other. (A creator whose transaction stays open keeps its lane's
-- lock, and its uncommitted sequence, until it ends: only first users of that same lane wait.)
-- A sequence another creator committed meanwhile makes CREATE SEQUENCE fail, as a duplicate (or,
-- when that creator ran the 0001 version of this function, a unique violation of the catalog):
-- the lane exists, and the lookup after it sees the sequence. SECURITY DEFINER: producers need
-- no CREATE privilege on the schema; the sequence is usable by whoever may use the schema.
CREATE OR REPLACE FUNCTION awa.create_lane(p_queue text, p_priority smallint, p_shard smallint)
RETURNS regclass LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_name constant text := awa.lane_sequence_name(p_queue, p_priority, p_shard);
BEGIN
    PERFORM pg_advisory_xact_lock(1096237390, awa.lane_lock_key(p_queue, p_priority, p_shard));
    BEGIN
        -- CACHE 1: positions must be handed out in the order producers ask for them.
        EXECUTE format('CREATE SEQUENCE awa.%I AS bigint CACHE 1', v_name);
    EXCEPTION WHEN duplicate_table OR unique_violation THEN
        RETURN to_regclass(format('awa.%I', v_name));
    END;
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE awa.%I TO PUBLIC', v_name);
    INSERT INTO awa.queue_lanes (queue, priority, shard) VALUES (p_queue, p_priority, p_shard)
        ON CONFLICT DO NOTHING;
    RETURN to_regclass(format('awa.%I', v_name));
END
$$;

-- Makes sure the lanes of (p_queue, p_priority) exist on every enqueue shard the queue has now,
-- creating the missing ones, and returns how many it created. The producers' Python API calls
-- it in a short transaction of its own (storage/lanes.py) the first time a process enqueues to
-- a queue and priority, so that the producer's own transaction only ever finds the lane's
-- sequence. Shared with other callers, the queue's shard lock (class 1096237395, 'AWAS') is taken
-- exclusively by a change of the queue's shard count, which creates the new shards' lanes of
-- every priority the queue has (lanes.sql query set_enqueue_shards): one of the two sees the
-- other, so no priority misses a shard.
CREATE OR REPLACE FUNCTION awa.ensure_lanes(p_queue text, p_priority smallint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_shards integer;
    v_created integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(1096237395, hashtext(p_queue));
    SELECT m.enqueue_shards INTO v_shards FROM awa.queue_meta m WHERE m.queue = p_queue;
    FOR v_shard IN 0 .. coalesce(v_shards, 1) - 1 LOOP
        IF to_regclass('awa.' || awa.lane_sequence_name(p_queue, p_priority, v_shard::smallint))
           IS NULL THEN
            PERFORM awa.create_lane(p_queue, p_priority, v_shard::smallint);
            v_created := v_created + 1;
        END IF;
    END LOOP;
    RETURN v_created;
END
$$;

-- Drops every lane's commit sequence (awa.reset_all in tests and benchmarks, the down
-- migration). The caller removes the queue_lanes rows, so the next use recreates each lane.
CREATE OR REPLACE FUNCTION awa.drop_lane_sequences() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sequence text;
BEGIN
    FOR v_sequence IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'awa' AND c.relkind = 'S' AND c.relname ~ '^lane_[0-9a-f]{32}$'
    LOOP
        EXECUTE format('DROP SEQUENCE awa.%I', v_sequence);
    END LOOP;
END
$$;

-- The ring slot (and its generation) the current transaction writes its ready rows to: read from
-- the ring cursor by the transaction's first write and kept for the rest of it, so all of a
-- transaction's rows of a lane, and the awa.lane_commits row that publishes them, share one
-- slot and are pruned together.
-- The read and the pin are one statement (migration 0031, #32): every statement a PL/pgSQL
-- function runs is an executor run of its own, paid by every enqueue. The cursor's row is
-- chosen in a subquery that is not flattened (LIMIT), so set_config runs for that row only.
CREATE OR REPLACE FUNCTION awa.producer_slot(OUT slot integer, OUT generation bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_pinned text := current_setting('awa.producer_slot', true);
BEGIN
    IF v_pinned IS NULL OR v_pinned = '' THEN
        SELECT set_config('awa.producer_slot', r.slot || ':' || r.generation, true) INTO v_pinned
          FROM (SELECT q.slot, q.generation FROM awa.queue_ring_rotations q
                 ORDER BY q.generation DESC LIMIT 1) AS r;
    END IF;
    slot := split_part(v_pinned, ':', 1)::integer;
    generation := split_part(v_pinned, ':', 2)::bigint;
END
$$;
