-- Rescue: finding the attempts of crashed or stopped workers.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- The receipts of the attempts holding a lease (heartbeating, or waiting on a callback): few,
-- whatever their age. A probe per lease (see awa.close_attempts on LATERAL ... LIMIT 1): as a
-- join, this could read every retained receipt once any lease exists. Plain SQL, so the
-- planner inlines it into its callers (awa.find_rescuable, awa.open_attempts).
CREATE OR REPLACE FUNCTION awa.leased_receipts()
RETURNS SETOF awa.claim_receipts LANGUAGE sql STABLE AS $$
    SELECT c.*
      FROM awa.leases x
      CROSS JOIN LATERAL (
          SELECT c.* FROM awa.claim_receipts c
           WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease
             AND c.ready_slot = x.ready_slot
           LIMIT 1) c
$$;

-- Open attempts the leader must rescue: silent for longer than the staleness window (newest
-- lease heartbeat, or the claim itself for an attempt that never heartbeated), or waiting on a
-- registered, unresumed callback past its timeout, which is then the only thing that counts.
-- Never for a deadline: the worker running an attempt stops it at its deadline and closes it
-- once the handler has returned (migration 0010), so an attempt whose worker still heartbeats
-- is that worker's, however late, and the job cannot run twice at once. Read-only: the leader
-- closes them through awa.close_attempts, whose guard makes a race with the attempt's own
-- completion resolve to exactly one closure.
--
-- Bounded by a cursor the leader keeps between passes: retained receipts are almost all closed,
-- and anti-joining every one of them cost about 2.5 µs per receipt on every pass. Candidates
-- are the attempts holding a lease (heartbeating or waiting on a callback; few, whatever their
-- age) and the receipts claimed in [p_claimed_after, now - staleness), found through the BRIN
-- index on claim_receipts.claimed_at. A lease-less receipt older than a complete pass's
-- staleness cutoff was stale at that pass, hence closed by it, so later passes need not look
-- at it again. A NULL bound scans everything, as a new leader's first pass does.
-- Plans: seq scans off, so the done anti-join probes the primary key per candidate instead of
-- sorting every retained closure.
CREATE OR REPLACE FUNCTION awa.find_rescuable(p_staleness_s double precision, p_limit integer,
                                              p_claimed_after timestamptz)
RETURNS TABLE (reason text, job awa.claimed_job) LANGUAGE sql STABLE
SET enable_seqscan = off AS $$
    WITH candidates AS (
        SELECT c.* FROM awa.leased_receipts() c
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

-- The four-argument form that leaders of 0.1.0 call during a rolling deploy: the same scan (the
-- deadline bound is no longer a reason to rescue).
CREATE OR REPLACE FUNCTION awa.find_rescuable(p_staleness_s double precision, p_limit integer,
                                              p_claimed_after timestamptz,
                                              p_deadline_after timestamptz)
RETURNS TABLE (reason text, job awa.claimed_job) LANGUAGE sql STABLE AS $$
    SELECT * FROM awa.find_rescuable(p_staleness_s, p_limit, p_claimed_after)
$$;

-- The open attempts (receipts without a closure), for the readers of "what is running": the
-- admin's lists, counts and bulk walks, the workers page and the queues' running depths.
-- After a complete rescue pass (its cursor in awa.rescue_marks, migration 0029) every
-- lease-less receipt claimed before the mark is closed, so the candidates are, as in
-- awa.find_rescuable, the attempts holding a lease and the receipts claimed since the mark
-- (through the BRIN index on claimed_at), each probed for its closure by primary key in a
-- subquery kept apart by OFFSET 0, so the closures are never read whole. Anti-joining every
-- retained receipt with its closure read the whole history on every call (issue #36); it is
-- still the answer in a database no leader has rescued yet, where a probe per receipt would
-- cost more than one hash of the closures. plpgsql: the mark is a value the plan of the
-- receipts since it is made for, not a guess.
CREATE OR REPLACE FUNCTION awa.open_attempts()
RETURNS SETOF awa.claim_receipts LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_mark timestamptz := (SELECT m.claimed_before FROM awa.rescue_marks m);
BEGIN
    IF v_mark IS NULL THEN
        RETURN QUERY
            SELECT c.* FROM awa.claim_receipts c
             WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                                  AND d.ready_slot = c.ready_slot);
        RETURN;
    END IF;
    RETURN QUERY
        WITH candidates AS MATERIALIZED (
            SELECT c.* FROM awa.leased_receipts() c
            UNION
            SELECT c.* FROM awa.claim_receipts c WHERE c.claimed_at >= v_mark
        )
        SELECT o.queue, o.priority, o.shard, o.commit_seq, o.lane_seq, o.ready_slot, o.job_id,
               o.run_lease, o.attempt, o.claimed_at, o.claimed_by, o.deadline_at
          FROM (SELECT c.*,
                       (SELECT true FROM awa.done_entries d
                         WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                           AND d.ready_slot = c.ready_slot) AS closed
                  FROM candidates c
                OFFSET 0) o
         WHERE o.closed IS NULL;
END
$$;
