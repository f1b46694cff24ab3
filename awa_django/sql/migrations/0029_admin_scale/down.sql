-- Reverse of migration 0029_admin_scale: awa.find_rescuable as migration 0010 left it (its
-- lease arm written out, not through awa.leased_receipts), then the new functions and table go.
CREATE OR REPLACE FUNCTION awa.find_rescuable(p_staleness_s double precision, p_limit integer,
                                              p_claimed_after timestamptz)
RETURNS TABLE (reason text, job awa.claimed_job) LANGUAGE sql STABLE
SET enable_seqscan = off AS $$
    WITH candidates AS (
        -- A probe per lease (see awa.close_attempts on LATERAL ... LIMIT 1): as a join, this
        -- could read every retained receipt once any lease exists.
        SELECT c.*
          FROM awa.leases x
          CROSS JOIN LATERAL (
              SELECT c.* FROM awa.claim_receipts c
               WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease
                 AND c.ready_slot = x.ready_slot
               LIMIT 1) c
        UNION
        SELECT c.*
          FROM awa.claim_receipts c
         WHERE c.claimed_at >= coalesce(p_claimed_after, '-infinity')
           AND c.claimed_at < now() - make_interval(secs => p_staleness_s)
    ), open AS MATERIALIZED (
        -- Materialized: the few open candidates are joined to their bodies, not all of them.
        SELECT c.*
          FROM candidates c
         WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries d
                            WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                              AND d.ready_slot = c.ready_slot)
    )
    SELECT CASE WHEN l.callback_timeout_at IS NOT NULL THEN 'callback_timeout'
                ELSE 'heartbeat' END,
           ROW(c.queue, c.priority, c.shard, c.lane_seq, c.ready_slot, c.job_id, r.kind, r.args,
               c.attempt, c.run_lease, r.max_attempts, r.run_at, r.created_at, r.metadata,
               r.tags, r.errors, NULL::jsonb, NULL::jsonb)::awa.claimed_job
      FROM open c
      JOIN awa.ready_entries r
        ON r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
       AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
      LEFT JOIN LATERAL (
          SELECT max(x.heartbeat_at) AS heartbeat_at,
                 max(x.callback_timeout_at) FILTER (WHERE x.callback_resumed_at IS NULL)
                     AS callback_timeout_at
            FROM awa.leases x WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease) l ON true
     WHERE CASE WHEN l.callback_timeout_at IS NOT NULL THEN l.callback_timeout_at < now()
                ELSE coalesce(l.heartbeat_at, c.claimed_at)
                         < now() - make_interval(secs => p_staleness_s) END
     LIMIT p_limit
$$;

DROP FUNCTION awa.open_attempts();
DROP FUNCTION awa.leased_receipts();
DROP TABLE awa.rescue_marks;
