-- Reverse of migration 0017_lanes: awa.ensure_lanes goes, and awa.create_lane is restored as
-- migration 0001 applied it (creators of every lane take turns on a lock of awa.queue_lanes).
DROP FUNCTION IF EXISTS awa.ensure_lanes(text, smallint);
CREATE OR REPLACE FUNCTION awa.create_lane(p_queue text, p_priority smallint, p_shard smallint)
RETURNS regclass LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_name constant text := awa.lane_sequence_name(p_queue, p_priority, p_shard);
    v_sequence regclass;
BEGIN
    LOCK TABLE awa.queue_lanes IN SHARE ROW EXCLUSIVE MODE;
    v_sequence := to_regclass(format('awa.%I', v_name));
    IF v_sequence IS NULL THEN
        -- CACHE 1: positions must be handed out in the order producers ask for them.
        EXECUTE format('CREATE SEQUENCE awa.%I AS bigint CACHE 1', v_name);
        EXECUTE format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE awa.%I TO PUBLIC', v_name);
        INSERT INTO awa.queue_lanes (queue, priority, shard) VALUES (p_queue, p_priority, p_shard)
            ON CONFLICT DO NOTHING;
        v_sequence := to_regclass(format('awa.%I', v_name));
    END IF;
    RETURN v_sequence;
END
$$;
