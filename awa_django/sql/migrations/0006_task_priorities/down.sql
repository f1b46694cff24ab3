-- Reverse of migration 0006_task_priorities: awa.effective_priority and awa.claim_order as
-- v0.1.0 defined them (aging raises every row to at least 1; the static lane order visits
-- every lane), and awa.lane_has_work dropped, so that migration 0001's reverse finds only the
-- objects it created.
CREATE OR REPLACE FUNCTION awa.effective_priority(p_priority smallint, p_run_at timestamptz,
                                       p_aging_s double precision) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_aging_s > 0
                THEN greatest(1, p_priority - least(
                         floor(greatest(extract(epoch FROM now() - p_run_at), 0) / p_aging_s),
                         32767)::integer)
                ELSE p_priority END
$$;

CREATE OR REPLACE FUNCTION awa.claim_order(p_queue text, p_aging_s double precision)
RETURNS TABLE (priority smallint, shard smallint, bound integer)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_lanes integer;
    v_shards integer;
BEGIN
    SELECT count(*), max(l.shard) + 1 INTO v_lanes, v_shards
      FROM awa.queue_lanes l WHERE l.queue = p_queue;
    IF v_lanes <= 1 OR p_aging_s <= 0 THEN
        RETURN QUERY
        WITH rotation AS (SELECT floor(random() * v_shards)::integer AS offset_by)
        SELECT l.priority, l.shard, 32767 FROM awa.queue_lanes l, rotation o
         WHERE l.queue = p_queue
         ORDER BY l.priority, (l.shard + o.offset_by) % v_shards;
        RETURN;
    END IF;
    RETURN QUERY
    WITH heads AS (
        SELECT l.priority, l.shard,
               awa.effective_priority(l.priority, h.run_at, p_aging_s) AS effective, h.run_at
          FROM awa.queue_lanes l
          CROSS JOIN LATERAL awa.lane_head(l.queue, l.priority, l.shard) h
         WHERE l.queue = p_queue
    )
    SELECT h.priority, h.shard, coalesce(lead(h.effective) OVER w, 32767)
      FROM heads h
    WINDOW w AS (ORDER BY h.effective, h.run_at, h.priority, h.shard)
     ORDER BY h.effective, h.run_at, h.priority, h.shard;
END
$$;

DROP FUNCTION awa.lane_has_work(text, smallint, smallint);
