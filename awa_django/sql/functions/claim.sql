-- Claims: lane order with priority aging, the claim itself, and the rate-limited claim.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- A waiting row's priority at claim time: one step more urgent per p_aging_s seconds since its
-- run_at, never above 1, the most urgent native priority; a row stored more urgent than that
-- (a django.tasks priority above 1) neither ages nor is lowered to 1, so those keep their
-- order. p_aging_s <= 0 disables aging. Computed, never written back.
CREATE OR REPLACE FUNCTION awa.effective_priority(p_priority smallint, p_run_at timestamptz,
                                       p_aging_s double precision) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_aging_s > 0
                THEN greatest(least(p_priority, 1), p_priority - least(
                         floor(greatest(extract(epoch FROM now() - p_run_at), 0) / p_aging_s),
                         32767)::integer)
                ELSE p_priority END
$$;

-- The row a claim of one lane takes next: the first unclaimed, untombstoned row of a commit
-- that arrived late in one of the lane's recorded holes (awa.lane_holes), else of the cursor's
-- commit or of the first commit after it that has one. A hole in the commit positions is not
-- waited for here, as awa.claim_ready does: claim order and in-process runs only need to know
-- which lane to look at.
CREATE OR REPLACE FUNCTION awa.lane_head(p_queue text, p_priority smallint, p_shard smallint)
RETURNS TABLE (job_id bigint, kind text, run_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT x.job_id, x.kind, x.run_at FROM (
        (SELECT 0 AS part, r.job_id, r.kind, r.run_at
           FROM awa.lane_holes g
           JOIN awa.lane_commits m
             ON m.queue = g.queue AND m.priority = g.priority AND m.shard = g.shard
            AND m.commit_seq BETWEEN g.first_seq AND g.last_seq
           CROSS JOIN LATERAL (
               SELECT r.job_id, r.kind, r.run_at, r.lane_seq FROM awa.ready_entries r
                WHERE r.queue = p_queue AND r.priority = p_priority AND r.shard = p_shard
                  AND r.ready_slot = m.ready_slot
                  AND r.lane_seq BETWEEN m.first_seq AND m.last_seq AND r.batch = m.batch
                  AND NOT EXISTS (
                      SELECT 1 FROM awa.claim_receipts c
                       WHERE c.queue = r.queue AND c.priority = r.priority
                         AND c.shard = r.shard AND c.commit_seq = m.commit_seq
                         AND c.lane_seq = r.lane_seq AND c.ready_slot = m.ready_slot)
                  AND NOT EXISTS (
                      SELECT 1 FROM awa.ready_tombstones t
                       WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                         AND t.lane_seq = r.lane_seq AND t.ready_slot = m.ready_slot)
                ORDER BY r.lane_seq LIMIT 1) r
          WHERE g.queue = p_queue AND g.priority = p_priority AND g.shard = p_shard
          ORDER BY m.commit_seq, r.lane_seq LIMIT 1)
        UNION ALL
        (SELECT 1 AS part, h.job_id, h.kind, h.run_at
           FROM (SELECT 1) AS one
           LEFT JOIN LATERAL (
               SELECT c.commit_seq, c.lane_seq FROM awa.claim_receipts c
                WHERE c.queue = p_queue AND c.priority = p_priority AND c.shard = p_shard
                ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
           CROSS JOIN LATERAL (
               SELECT r.job_id, r.kind, r.run_at
                 FROM awa.lane_commits m
                 CROSS JOIN LATERAL (
                     SELECT r.job_id, r.kind, r.run_at FROM awa.ready_entries r
                      WHERE r.queue = p_queue AND r.priority = p_priority AND r.shard = p_shard
                        AND r.ready_slot = m.ready_slot
                        AND r.lane_seq BETWEEN m.first_seq AND m.last_seq AND r.batch = m.batch
                        AND (m.commit_seq > coalesce(c.commit_seq, 0) OR r.lane_seq > c.lane_seq)
                        AND NOT EXISTS (
                            SELECT 1 FROM awa.ready_tombstones t
                             WHERE t.queue = r.queue AND t.priority = r.priority
                               AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                               AND t.ready_slot = m.ready_slot)
                      ORDER BY r.lane_seq LIMIT 1) r
                WHERE m.queue = p_queue AND m.priority = p_priority AND m.shard = p_shard
                  AND m.commit_seq >= coalesce(c.commit_seq, 0)
                ORDER BY m.commit_seq LIMIT 1) h)
    ) x
    ORDER BY x.part LIMIT 1
$$;

-- The ready rows that wait for a worker, of p_queue (of every queue when NULL), read as a
-- claim finds them rather than by probing every ready row for its claim (issue #36): each
-- lane's claim cursor is its newest receipt, and the rows after it (the rest of the cursor's
-- commit and the commits after it) have no receipt (a receipt after the cursor would be the
-- cursor), so each is probed only for a tombstone; the rows of commits that arrived late in a
-- recorded hole behind the cursor (awa.lane_holes, almost always none) are probed for a
-- receipt as well. The claimed rows, however many the ring retains above or below the waiting
-- ones, are never read. The available count, queue health's depths and a queue's drain read
-- it. SQL, not STRICT: the planner inlines it, so a caller's filter on its columns and the
-- columns it does not read shape the plan.
CREATE OR REPLACE FUNCTION awa.waiting_entries(p_queue text)
RETURNS TABLE (queue text, priority smallint, shard smallint, lane_seq bigint,
               ready_slot integer, job_id bigint, kind text, run_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT r.queue, r.priority, r.shard, r.lane_seq, r.ready_slot, r.job_id, r.kind, r.run_at
      FROM awa.queue_lanes l
      LEFT JOIN LATERAL (
          SELECT c.commit_seq, c.lane_seq FROM awa.claim_receipts c
           WHERE c.queue = l.queue AND c.priority = l.priority AND c.shard = l.shard
           ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
      -- Kept apart (OFFSET 0), so each is a probe by the lane and its cursor, never a join of
      -- every commit or ready row that filters by the cursor afterwards.
      CROSS JOIN LATERAL (
          SELECT m.commit_seq, m.ready_slot, m.batch, m.first_seq, m.last_seq
            FROM awa.lane_commits m
           WHERE m.queue = l.queue AND m.priority = l.priority AND m.shard = l.shard
             AND m.commit_seq >= coalesce(c.commit_seq, 0)
          OFFSET 0) m
      CROSS JOIN LATERAL (
          SELECT r.queue, r.priority, r.shard, r.lane_seq, r.ready_slot, r.job_id, r.kind,
                 r.run_at
            FROM awa.ready_entries r
           WHERE r.queue = l.queue AND r.priority = l.priority AND r.shard = l.shard
             AND r.ready_slot = m.ready_slot
             -- In the cursor's commit, only the rows after it: a range of the primary key, so
             -- the claimed rows before it are not read.
             AND r.lane_seq BETWEEN CASE WHEN m.commit_seq = c.commit_seq THEN c.lane_seq + 1
                                         ELSE m.first_seq END
                                AND m.last_seq
             AND r.batch = m.batch
          OFFSET 0) r
     WHERE (p_queue IS NULL OR l.queue = p_queue)
       AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                        WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                          AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
    UNION ALL
    SELECT r.queue, r.priority, r.shard, r.lane_seq, r.ready_slot, r.job_id, r.kind, r.run_at
      FROM awa.lane_holes g
      JOIN awa.lane_commits m
        ON m.queue = g.queue AND m.priority = g.priority AND m.shard = g.shard
       AND m.commit_seq BETWEEN g.first_seq AND g.last_seq
      JOIN awa.ready_entries r
        ON r.queue = g.queue AND r.priority = g.priority AND r.shard = g.shard
       AND r.ready_slot = m.ready_slot AND r.lane_seq BETWEEN m.first_seq AND m.last_seq
       AND r.batch = m.batch
     WHERE (p_queue IS NULL OR g.queue = p_queue)
       -- Behind the lane's cursor: a commit after it is read above.
       AND m.commit_seq < (SELECT max(c.commit_seq) FROM awa.claim_receipts c
                            WHERE c.queue = g.queue AND c.priority = g.priority
                              AND c.shard = g.shard)
       AND NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                        WHERE c.queue = r.queue AND c.priority = r.priority
                          AND c.shard = r.shard AND c.commit_seq = m.commit_seq
                          AND c.lane_seq = r.lane_seq AND c.ready_slot = r.ready_slot)
       AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                        WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                          AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
$$;

-- The lanes of p_queue in the order a claim visits them, with each lane's ``bound``: the
-- effective priority of the next lane's head (32767 for the last, or when there is no aging);
-- awa.claim_ready takes a lane's rows only while they are at least that urgent. The lanes are
-- the ones given (p_lanes, each as priority * 65536 + shard: a queue's lanes that may hold
-- work, from its lane mark), or every lane of the queue when it is NULL.
--
-- With aging, only lanes with a claimable head are returned, best first: by the head's
-- effective priority, then its run_at (the longest-waiting head wins a tie, which also orders
-- shards of one priority), then the lane. That costs a cursor and a head read per lane, so
-- without aging (or with a single lane) the order is static instead: by priority, and within
-- a priority from a random shard onwards, so every shard of a busy queue gets served.
CREATE OR REPLACE FUNCTION awa.claim_order(p_queue text, p_aging_s double precision,
                                           p_lanes integer[])
RETURNS TABLE (priority smallint, shard smallint, bound integer)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_lanes integer;
    v_shards integer;
BEGIN
    IF p_lanes IS NULL THEN
        SELECT count(*), max(l.shard) + 1 INTO v_lanes, v_shards
          FROM awa.queue_lanes l WHERE l.queue = p_queue;
    ELSE
        SELECT count(*), max(x & 65535) + 1 INTO v_lanes, v_shards FROM unnest(p_lanes) AS x;
    END IF;
    IF v_lanes <= 1 OR p_aging_s <= 0 THEN
        RETURN QUERY
        WITH rotation AS (SELECT floor(random() * v_shards)::integer AS offset_by),
        lanes AS (
            SELECT l.priority, l.shard FROM awa.queue_lanes l
             WHERE p_lanes IS NULL AND l.queue = p_queue
            UNION ALL
            SELECT (x >> 16)::smallint, (x & 65535)::smallint FROM unnest(p_lanes) AS x
        )
        SELECT l.priority, l.shard, 32767 FROM lanes l, rotation o
         ORDER BY l.priority, (l.shard + o.offset_by) % v_shards;
        RETURN;
    END IF;
    RETURN QUERY
    WITH lanes AS (
        SELECT l.priority, l.shard FROM awa.queue_lanes l
         WHERE p_lanes IS NULL AND l.queue = p_queue
        UNION ALL
        SELECT (x >> 16)::smallint, (x & 65535)::smallint FROM unnest(p_lanes) AS x
    ), heads AS (
        SELECT l.priority, l.shard,
               awa.effective_priority(l.priority, h.run_at, p_aging_s) AS effective, h.run_at
          FROM lanes l
          CROSS JOIN LATERAL awa.lane_head(p_queue, l.priority, l.shard) h
    )
    SELECT h.priority, h.shard, coalesce(lead(h.effective) OVER w, 32767)
      FROM heads h
    WINDOW w AS (ORDER BY h.effective, h.run_at, h.priority, h.shard)
     ORDER BY h.effective, h.run_at, h.priority, h.shard;
END
$$;

-- Claims up to p_limit ready jobs of one queue, lane by lane in effective priority order.
--
-- A claimer tries the lane's claim lock (one claimer per lane at a time; others move on), then
-- derives the lane's cursor from its newest receipt, (commit_seq, lane_seq), and takes the next
-- rows in lane order: the rest of the cursor's commit, then the commits after it, each commit's
-- rows in lane_seq order. The cursor is read by a statement after the lock, so it sees the
-- receipts of the claimer that held the lane before us; when no hole follows it, that statement
-- also claims (below). Receipts are appended in the same transaction: a claim that rolls back
-- leaves the cursor where it was. Nothing is updated.
--
-- Commit positions are dense, so a claimer takes commits only while they follow each other
-- without a hole: a missing position belongs to a producer that is committing right now, whose
-- rows must come first, or to one that failed at commit. When the next commit after the cursor
-- is not the next position, the claimer tries the lane's producer lock exclusively: it gets it
-- only when no producer of the lane is mid-commit, so every missing position is dead and the
-- lane is taken as it stands (holding the lock to the end of the claim, which keeps the lane's
-- producers out for that long). Otherwise it takes only the rest of the cursor's commit and
-- comes back later, unless the commit after the hole was drawn more than 250 ms ago: then the
-- missing position's producer has held it that long (a transaction that published early with
-- SET CONSTRAINTS ... IMMEDIATE and stays open), and the claim takes the lane past it rather
-- than stall every other producer's jobs, recording the position in awa.lane_holes; a commit
-- that later appears there is claimed first, once (docs/architecture.md, "Live holes").
--
-- A queue keeps every lane it ever used: up to 201 priorities per shard with django.tasks, most
-- of them drained at any time. Past 4 lanes per shard, a claim visits only the lanes that may
-- hold work, from the queue's newest lane mark (awa.lane_marks): the lanes it lists, and those
-- with a commit its snapshot did not see, found by transaction id (lane_commits_batch). A lane
-- the claim finds drained, or takes the last rows of, is left out of the next mark, which the
-- claim appends in its own transaction (a claim that rolls back takes its mark with it). So a
-- claim's cost follows the lanes with work, not the lanes the queue ever had; with at most 4
-- lanes per shard the claim visits them all, as probing or marking them costs more than the
-- drained lanes it would skip. Why a mark is never wrong: a lane left out had nothing to claim
-- in the mark's snapshot (or as the marking claim left it), and only a commit that snapshot did
-- not see can give it work again, and the next claim reads exactly those.
--
-- Lanes are visited in the order awa.claim_order gives (priority aging: p_aging_s > 0 lets a
-- waiting row gain one priority step per p_aging_s seconds). A lane yields only the prefix of
-- rows whose effective priority does not exceed the next lane's head (its bound), so a batch
-- never takes fresh low-priority rows behind an aged head ahead of more urgent work; when a
-- lane was cut short that way, another round serves the lanes again in the new order.
--
-- p_sequential runs each lane one job at a time across the fleet: a lane whose newest claim is
-- still open is skipped, and a lane yields one row per claim. Jobs sharing an ordering key
-- (one lane) then run strictly one after another, in enqueue order.
--
-- p_deadline_s > 0 gives each attempt a hard deadline; progress and checkpoint saved by earlier
-- attempts of the job come back with it.
--
-- Plans: one generic plan per session, with seq scans off. Re-planning per call costs more
-- than running the claim (each statement plans over every partition of several rings), and a
-- generic plan made while a partition was nearly empty would otherwise seq-scan it long after
-- it has grown; index probes on empty partitions cost microseconds. JIT is off: a generic
-- plan's estimates (the lanes an aged order reads the heads of) can pass its cost threshold,
-- and compiling took far longer than the claim's statements take to run.
CREATE OR REPLACE FUNCTION awa.claim_ready(p_queue text, p_limit integer, p_claimed_by text,
                                p_deadline_s double precision, p_aging_s double precision,
                                p_sequential boolean)
RETURNS SETOF awa.claimed_job LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET jit = off AS $$
DECLARE
    -- The lane being visited.
    v_priority smallint;
    v_shard smallint;
    v_bound integer;
    v_at record;
    v_job awa.claimed_job;
    v_commit bigint;
    v_settled boolean;
    -- Whether the lane's claim statement runs again, after the checks its first run left to
    -- the function.
    v_fallback boolean;
    -- Live holes: the last position a claim of the lane may take past missing positions whose
    -- producers may still commit (0: none), and those positions, as ranges, to record.
    v_pass_to bigint;
    v_gap_first bigint[];
    v_gap_last bigint[];
    v_claimed_to bigint;
    v_remaining integer := p_limit;
    v_claimed integer;
    v_round_claimed integer;
    v_again boolean := true;
    v_order refcursor;
    -- Lane marks: whether the queue's claims go by them; the newest mark and what it did not
    -- see, in the snapshot of the statement that read them; the lanes to visit (each as
    -- priority * 65536 + shard; NULL: every lane), whether they are walked as they are (the
    -- static order of a marked queue) and in priority order; the lanes found with nothing left.
    v_marked boolean;
    v_look record;
    v_lanes integer[];
    v_walk boolean;
    -- An aged claim's walk of the lanes below priority 1 (see below), and whether v_order is
    -- open.
    v_urgent boolean;
    v_ordered boolean;
    v_i integer;
    v_drained integer[] := '{}';
    -- The lanes this claim took the last rows of, by its own receipts (see below).
    v_taken integer[] := '{}';
BEGIN
    -- What every claim reads before its lanes, in one statement (migration 0040; three before,
    -- a statement each): whether the queue is paused; its newest lane mark and the lanes with a
    -- commit the mark did not see: of a transaction from its snapshot's xmax on, or of one in
    -- progress then (one still in progress is in this snapshot too, and an aborted one
    -- published nothing), with this transaction as unseen if it already has an id: its own
    -- commits (an in-process run publishes inside the caller's transaction) are not in its
    -- snapshot's list, and may still follow; the statement's snapshot is the one the next mark
    -- records. And, for a queue without a mark only, whether it has lanes enough to go by marks
    -- and, when its order is the static one (no aging, or one lane), its lanes in that order,
    -- which the claim then walks as a marked queue's (migration 0038).
    SELECT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = p_queue AND m.paused)
               AS paused,
           pg_current_snapshot() AS snapshot,
           ARRAY(SELECT pg_snapshot_xip(pg_current_snapshot())
                 UNION ALL
                 SELECT x FROM pg_current_xact_id_if_assigned() AS x
                  WHERE x IS NOT NULL) AS unseen,
           k.mark IS NOT NULL AS had_mark, k.lanes, k.shards,
           coalesce(p.commits, 0) AS published, p.lanes AS published_lanes,
           coalesce(o.many, false) AS many, o.static_lanes
      INTO v_look
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (
          SELECT k.mark, k.seen_below, k.unseen, k.lanes, k.shards FROM awa.lane_marks k
           WHERE k.queue = p_queue ORDER BY k.mark DESC LIMIT 1) k ON true
      -- Two probes of lane_commits_batch, not one scan with an OR: as one condition it
      -- bounded the index by the queue alone and filtered every commit of the queue the
      -- ring retains, on every claim (migration 0039); one range from seen_below on, and
      -- one lookup per transaction in progress then (below seen_below, so none is counted
      -- twice). Without a mark both are empty: a range from NULL, and no transactions.
      LEFT JOIN LATERAL (
          SELECT count(*) AS commits, array_agg(c.priority * 65536 + c.shard) AS lanes
            FROM (SELECT c.priority, c.shard FROM awa.lane_commits c
                   WHERE c.queue = p_queue AND c.batch >= k.seen_below
                  UNION ALL
                  SELECT c.priority, c.shard FROM unnest(k.unseen) AS u(batch)
                   CROSS JOIN LATERAL (
                       -- Kept apart (OFFSET 0): a probe per transaction, never a hash join
                       -- that reads the queue's every commit.
                       SELECT c.priority, c.shard FROM awa.lane_commits c
                        WHERE c.queue = p_queue AND c.batch = u.batch OFFSET 0) c
                   WHERE u.batch < k.seen_below) c) p ON true
      -- A marked queue's claim reads none of its lanes here: the condition on the mark gates
      -- the scan.
      LEFT JOIN LATERAL (
          WITH lanes AS (
              SELECT l.priority, l.shard FROM awa.queue_lanes l
               WHERE k.mark IS NULL AND l.queue = p_queue
          ), rotation AS (
              SELECT count(*) AS lanes, max(l.shard) + 1 AS shards,
                     floor(random() * (max(l.shard) + 1))::integer AS offset_by
                FROM lanes l
          )
          SELECT o.lanes > 4 * o.shards AS many,
                 CASE WHEN o.lanes <= 1 OR p_aging_s <= 0 THEN
                     ARRAY(SELECT l.priority * 65536 + l.shard FROM lanes l
                            ORDER BY l.priority, (l.shard + o.offset_by) % o.shards) END
                     AS static_lanes
            FROM rotation o
           WHERE k.mark IS NULL) o ON true;
    IF v_look.paused THEN
        RETURN;
    END IF;
    v_marked := v_look.had_mark OR v_look.many;
    IF NOT v_marked THEN
        v_lanes := v_look.static_lanes;
    ELSE
        IF v_look.had_mark AND v_look.published = 0 AND v_look.shards = 1 THEN
            -- Nothing new and one shard: the mark's lanes, which it keeps in priority order.
            v_lanes := v_look.lanes;
        ELSE
            -- The mark's lanes and the published ones (every lane of a queue without a mark),
            -- in the static order: by priority, and within a priority from a random shard on.
            WITH lanes AS (
                SELECT x FROM unnest(v_look.lanes) AS x
                UNION
                SELECT x FROM unnest(v_look.published_lanes) AS x
                UNION
                SELECT l.priority * 65536 + l.shard FROM awa.queue_lanes l
                 WHERE NOT v_look.had_mark AND l.queue = p_queue
            ), rotation AS (
                SELECT floor(random() * (max(l.x & 65535) + 1))::integer AS offset_by,
                       max(l.x & 65535) + 1 AS shards
                  FROM lanes l
            )
            SELECT coalesce(array_agg(l.x ORDER BY l.x >> 16,
                                      ((l.x & 65535) + o.offset_by) % o.shards), '{}')
              INTO v_lanes
              FROM lanes l, rotation o;
        END IF;
    END IF;
    WHILE v_again AND v_remaining > 0 LOOP
        v_again := false;
        v_round_claimed := 0;
        -- A marked queue's static order is its lanes to visit as they are: only the first few
        -- are usually visited, and passing them all through awa.claim_order cost more than
        -- the rest of the claim. An unmarked queue's lanes are set above only when its order
        -- is the static one.
        v_walk := (v_marked OR v_lanes IS NOT NULL)
                  AND (p_aging_s <= 0 OR cardinality(v_lanes) <= 1);
        -- An aged claim of a marked queue walks its lanes below priority 1 the same way: their
        -- rows never age (awa.effective_priority), and every lane of priority 1 or more has an
        -- effective priority of at least 1, so they come first in the aged order whatever the
        -- heads' ages, and no later lane's bound can cut them short. Only when the claim gets
        -- past them are the rest (v_lanes is in priority order) put through awa.claim_order,
        -- which reads the head of each: with django.tasks priorities over up to 201 lanes, an
        -- aged claim read every head, most of them of lanes it never reached.
        v_urgent := v_marked AND NOT v_walk;
        v_ordered := false;
        v_i := 0;
        IF NOT v_walk AND NOT v_urgent THEN
            OPEN v_order FOR SELECT * FROM awa.claim_order(p_queue, p_aging_s, v_lanes);
            v_ordered := true;
        END IF;
        <<lanes>>
        LOOP
            IF v_urgent THEN
                v_i := v_i + 1;
                EXIT WHEN v_i > cardinality(v_lanes);
                IF v_lanes[v_i] >> 16 >= 1 THEN
                    v_urgent := false;
                    OPEN v_order FOR SELECT * FROM awa.claim_order(p_queue, p_aging_s,
                                                                   v_lanes[v_i:]);
                    v_ordered := true;
                ELSE
                    v_priority := v_lanes[v_i] >> 16;
                    v_shard := v_lanes[v_i] & 65535;
                    v_bound := 32767;
                END IF;
            END IF;
            IF v_urgent THEN
                NULL;  -- the lane is set above
            ELSIF v_walk THEN
                v_i := v_i + 1;
                EXIT WHEN v_i > cardinality(v_lanes);
                v_priority := v_lanes[v_i] >> 16;
                v_shard := v_lanes[v_i] & 65535;
                v_bound := 32767;
            ELSE
                FETCH v_order INTO v_priority, v_shard, v_bound;
                EXIT WHEN NOT FOUND;
            END IF;
            -- An advisory lock, not a row lock on queue_lanes: a row lock would give even an
            -- empty claim a transaction id and a WAL record, so every idle poll would wait for
            -- a WAL flush on a durable server. Locks taken in an earlier round are ours already.
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(
                1096237379, awa.lane_lock_key(p_queue, v_priority, v_shard));
            -- The cursor, the commit it is in (in the receipt's slot: a commit shares the slot
            -- of its rows), the next published position after it and when it was drawn, and
            -- whether the lane has recorded holes (awa.lane_holes, almost always empty).
            -- It is read by the statement that claims (migration 0040; a statement of its own
            -- before, and the claim another): on the first visit that statement claims only
            -- when nothing is left to settle or pass (no hole recorded, the next commit follows
            -- the cursor without a missing position: almost always) and the claim is not
            -- sequential; otherwise it takes nothing, and the cursor it read leads the checks
            -- below, after which it runs again as their claim. Under the lane's claim lock the
            -- cursor it reads then is the same (a late commit's rows are behind it).
            v_claimed := 0;
            v_settled := false;
            v_pass_to := 0;
            v_fallback := false;
            LOOP
                WITH lane_at AS (
                    SELECT c.commit_seq, c.lane_seq, c.job_id, c.run_lease, c.ready_slot, m.batch,
                           m.last_seq, n.commit_seq AS next_commit,
                           n.committed_at AS next_committed_at,
                           EXISTS (SELECT 1 FROM awa.lane_holes g
                                    WHERE g.queue = p_queue AND g.priority = v_priority
                                      AND g.shard = v_shard) AS has_holes
                      FROM (SELECT 1) AS one
                      LEFT JOIN LATERAL (
                          SELECT c.commit_seq, c.lane_seq, c.job_id, c.run_lease, c.ready_slot
                            FROM awa.claim_receipts c
                           WHERE c.queue = p_queue AND c.priority = v_priority
                             AND c.shard = v_shard
                           ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
                      LEFT JOIN LATERAL (
                          SELECT m.batch, m.last_seq FROM awa.lane_commits m
                           WHERE m.queue = p_queue AND m.priority = v_priority
                             AND m.shard = v_shard AND m.commit_seq = c.commit_seq
                             AND m.ready_slot = c.ready_slot
                           LIMIT 1) m ON true
                      LEFT JOIN LATERAL (
                          SELECT n.commit_seq, n.committed_at FROM awa.lane_commits n
                           WHERE n.queue = p_queue AND n.priority = v_priority
                             AND n.shard = v_shard AND n.commit_seq > coalesce(c.commit_seq, 0)
                           ORDER BY n.commit_seq LIMIT 1) n ON true
                ), usable AS (
                    -- Commits are numbered from the cursor's own (when it still holds rows to
                    -- claim) or from the one after it; those whose position is that number plus
                    -- their rank have no hole before them. On the first visit, only when nothing is
                    -- left to settle or pass: a condition on the cursor's one row, so the commits
                    -- are not read otherwise.
                    SELECT u.commit_seq, u.ready_slot, u.batch, u.first_seq, u.last_seq
                      FROM lane_at a
                      CROSS JOIN LATERAL (
                          SELECT n.commit_seq, n.ready_slot, n.batch,
                                 CASE WHEN n.commit_seq = a.commit_seq THEN a.lane_seq + 1
                                      ELSE n.first_seq END AS first_seq,
                                 n.last_seq,
                                 n.commit_seq - row_number() OVER (ORDER BY n.commit_seq) AS behind
                            FROM awa.lane_commits n
                           WHERE n.queue = p_queue AND n.priority = v_priority
                             AND n.shard = v_shard AND n.commit_seq >= coalesce(a.commit_seq, 0)
                           ORDER BY n.commit_seq
                           LIMIT v_remaining + 1) u
                     WHERE (v_fallback
                            OR (NOT p_sequential AND NOT a.has_holes
                                AND (a.next_commit IS NULL
                                     OR a.next_commit = coalesce(a.commit_seq, 0) + 1)))
                       AND (v_settled OR u.commit_seq <= v_pass_to
                            OR u.behind = coalesce(a.commit_seq, 0)
                                          - CASE WHEN a.batch IS NULL THEN 0 ELSE 1 END)
                ), candidates AS (
                    -- The lane's next rows in claim order, without an ORDER BY: the lateral join
                    -- can only run as a nested loop, which emits the commits in usable's order
                    -- (its LIMIT keeps its ORDER BY) and each commit's rows in lane_seq order, so
                    -- the LIMIT stops after the rows it takes. Sorting here made the claim read up
                    -- to its limit from each of the commits ahead (a backlog enqueued in bulk
                    -- calls) and keep the first; picked and the claim's result put these in order.
                    SELECT u.commit_seq, r.*,
                           awa.effective_priority(r.priority, r.run_at, p_aging_s) AS effective
                      FROM usable u
                      CROSS JOIN LATERAL (
                          -- A commit's rows are in its own slot: stated, it prunes the other
                          -- slots' partitions of both tables from each commit's probe.
                          SELECT r.* FROM awa.ready_entries r
                           WHERE r.queue = p_queue AND r.priority = v_priority
                             AND r.shard = v_shard AND r.ready_slot = u.ready_slot
                             AND r.lane_seq BETWEEN u.first_seq AND u.last_seq AND r.batch = u.batch
                             AND NOT EXISTS (
                                 -- The commit's range is implied, but stated it bounds the index
                                 -- scan of a merge anti-join, which otherwise reads every tombstone
                                 -- of the lane.
                                 SELECT 1 FROM awa.ready_tombstones t
                                  WHERE t.queue = r.queue AND t.priority = r.priority
                                    AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                                    AND t.ready_slot = u.ready_slot
                                    AND t.lane_seq BETWEEN u.first_seq AND u.last_seq)
                           ORDER BY r.lane_seq
                           LIMIT v_remaining) r
                     LIMIT CASE WHEN p_sequential THEN 1 ELSE v_remaining END
                ), picked AS (
                    -- The lane's FIFO prefix within the bound: the first row past it ends the take.
                    SELECT * FROM (
                        SELECT c.*, bool_and(c.effective <= v_bound)
                                        OVER (ORDER BY c.commit_seq, c.lane_seq) AS within_bound
                          FROM candidates c) b
                     WHERE b.within_bound
                ), receipts AS (
                    INSERT INTO awa.claim_receipts (queue, priority, shard, commit_seq, lane_seq,
                                                    ready_slot, job_id, run_lease, attempt,
                                                    claimed_by, deadline_at)
                    SELECT p.queue, p.priority, p.shard, p.commit_seq, p.lane_seq, p.ready_slot,
                           p.job_id, p.run_lease + 1, p.attempt + 1, p_claimed_by,
                           CASE WHEN p_deadline_s > 0
                                THEN now() + make_interval(secs => p_deadline_s) END
                      FROM picked p
                )
                -- The jobs as an array, beside the cursor: a statement's rows can go to the
                -- caller (RETURN QUERY) or into variables, not both.
                SELECT a.*,
                       ARRAY(SELECT ROW(p.queue, p.priority, p.shard, p.lane_seq, p.ready_slot,
                                        p.job_id, p.kind, p.args, p.attempt + 1, p.run_lease + 1,
                                        p.max_attempts, p.run_at, p.created_at, p.metadata, p.tags,
                                        p.errors, s.progress, s.checkpoint)::awa.claimed_job
                               FROM picked p
                               -- A probe per claimed row (see awa.close_attempts on
                               -- LATERAL ... LIMIT 1), of a job that ran before (migration
                               -- 0038): state is saved by an attempt (its heartbeats, its
                               -- close), and a row that no attempt has claimed yet has
                               -- run_lease 0 (every later row of a job, retried, rescued,
                               -- snoozed or requeued from the DLQ, carries a lease above it),
                               -- so a first attempt's probe could find nothing. The condition
                               -- reads only the outer row: the probe's gate, not its filter.
                               LEFT JOIN LATERAL (
                                   SELECT s.progress, s.checkpoint FROM awa.attempt_state s
                                    WHERE s.job_id = p.job_id AND p.run_lease > 0 LIMIT 1) s ON true
                              ORDER BY p.commit_seq, p.lane_seq) AS jobs
                  INTO v_at
                  FROM lane_at a;
                v_claimed := cardinality(v_at.jobs);
                IF v_claimed > 0 THEN
                    FOREACH v_job IN ARRAY v_at.jobs LOOP
                        RETURN NEXT v_job;
                    END LOOP;
                END IF;
                EXIT WHEN v_fallback OR v_claimed > 0;
                -- Nothing published after the cursor, nothing left in its commit and no hole
                -- that may still bring a commit: the lane is drained, and an empty claim reads no
                -- further (the next mark leaves it out).
                IF v_at.next_commit IS NULL AND NOT v_at.has_holes
                   AND (v_at.batch IS NULL OR v_at.lane_seq >= v_at.last_seq) THEN
                    IF v_marked THEN
                        v_drained := v_drained || (v_priority * 65536 + v_shard);
                    END IF;
                    CONTINUE lanes;
                END IF;
                v_commit := coalesce(v_at.commit_seq, 0);
                -- Inside an IF, not folded into a CONTINUE condition: an expression's plan is set
                -- up whole even when AND short-circuits, which locked every partition of two more
                -- ring tables on every claim of every queue.
                IF p_sequential AND v_at.job_id IS NOT NULL THEN
                    CONTINUE lanes WHEN NOT EXISTS (
                        SELECT 1 FROM awa.done_entries d
                         WHERE d.job_id = v_at.job_id AND d.run_lease = v_at.run_lease
                           AND d.ready_slot = v_at.ready_slot);
                END IF;
                IF v_at.has_holes OR v_at.next_commit > v_commit + 1 THEN
                    v_settled := pg_try_advisory_xact_lock(
                        1096237388, awa.lane_lock_key(p_queue, v_priority, v_shard));
                END IF;
                IF v_at.has_holes THEN
                    -- Rare: positions an earlier claim stepped over (below). A commit that has
                    -- appeared in one since comes first, its positions being older than the
                    -- cursor's. A sequential lane runs one job at a time, a late one included.
                    IF p_sequential AND EXISTS (
                        SELECT 1 FROM awa.lane_holes g
                          JOIN awa.claim_receipts c
                            ON c.queue = g.queue AND c.priority = g.priority AND c.shard = g.shard
                           AND c.commit_seq BETWEEN g.first_seq AND g.last_seq
                         WHERE g.queue = p_queue AND g.priority = v_priority AND g.shard = v_shard
                           AND NOT EXISTS (
                               SELECT 1 FROM awa.done_entries d
                                WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                                  AND d.ready_slot = c.ready_slot)) THEN
                        CONTINUE lanes;
                    END IF;
                    RETURN QUERY
                    WITH picked AS (
                        SELECT m.commit_seq, r.*
                          FROM awa.lane_holes g
                          JOIN awa.lane_commits m
                            ON m.queue = g.queue AND m.priority = g.priority AND m.shard = g.shard
                           AND m.commit_seq BETWEEN g.first_seq AND g.last_seq
                          CROSS JOIN LATERAL (
                              SELECT r.* FROM awa.ready_entries r
                               WHERE r.queue = p_queue AND r.priority = v_priority
                                 AND r.shard = v_shard AND r.ready_slot = m.ready_slot
                                 AND r.lane_seq BETWEEN m.first_seq AND m.last_seq
                                 AND r.batch = m.batch
                                 AND NOT EXISTS (
                                     SELECT 1 FROM awa.claim_receipts c
                                      WHERE c.queue = r.queue AND c.priority = r.priority
                                        AND c.shard = r.shard AND c.commit_seq = m.commit_seq
                                        AND c.lane_seq = r.lane_seq AND c.ready_slot = m.ready_slot)
                                 AND NOT EXISTS (
                                     SELECT 1 FROM awa.ready_tombstones t
                                      WHERE t.queue = r.queue AND t.priority = r.priority
                                        AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                                        AND t.ready_slot = m.ready_slot)
                               ORDER BY r.lane_seq
                               LIMIT v_remaining) r
                         WHERE g.queue = p_queue AND g.priority = v_priority AND g.shard = v_shard
                           -- Behind the cursor only: a commit ahead of it (the cursor fell back
                           -- after a prune) is the lane's to take in order, below.
                           AND m.commit_seq < v_commit
                         ORDER BY m.commit_seq, r.lane_seq
                         LIMIT CASE WHEN p_sequential THEN 1 ELSE v_remaining END
                    ), receipts AS (
                        INSERT INTO awa.claim_receipts (queue, priority, shard, commit_seq,
                                                        lane_seq, ready_slot, job_id, run_lease,
                                                        attempt, claimed_by, deadline_at)
                        SELECT p.queue, p.priority, p.shard, p.commit_seq, p.lane_seq, p.ready_slot,
                               p.job_id, p.run_lease + 1, p.attempt + 1, p_claimed_by,
                               CASE WHEN p_deadline_s > 0
                                    THEN now() + make_interval(secs => p_deadline_s) END
                          FROM picked p
                    )
                    SELECT p.queue, p.priority, p.shard, p.lane_seq, p.ready_slot, p.job_id, p.kind,
                           p.args, p.attempt + 1, p.run_lease + 1, p.max_attempts, p.run_at,
                           p.created_at, p.metadata, p.tags, p.errors, s.progress, s.checkpoint
                      FROM picked p
                      LEFT JOIN LATERAL (
                          SELECT s.progress, s.checkpoint FROM awa.attempt_state s
                           WHERE s.job_id = p.job_id AND p.run_lease > 0 LIMIT 1) s ON true
                     ORDER BY p.commit_seq, p.lane_seq;
                    GET DIAGNOSTICS v_claimed = ROW_COUNT;
                    -- A range is done once none of its positions can bring a job any more:
                    -- each has a commit (whose rows are all claimed, and on a sequential lane
                    -- closed), or no transaction that may have drawn one is in flight, so a
                    -- position still missing belongs to one that ended without it: no producer
                    -- of the lane (this claim holds their lock), or none of the transactions in
                    -- progress when the range was recorded (each has an id below seen_below, and
                    -- the oldest one in progress now is not below it), which also settles a lane
                    -- whose producers are never all out of flight at once.
                    DELETE FROM awa.lane_holes g
                     WHERE g.queue = p_queue AND g.priority = v_priority AND g.shard = v_shard
                       AND (v_settled OR pg_snapshot_xmin(pg_current_snapshot()) >= g.seen_below
                            OR (SELECT count(DISTINCT m.commit_seq) FROM awa.lane_commits m
                                 WHERE m.queue = p_queue AND m.priority = v_priority
                                   AND m.shard = v_shard
                                   AND m.commit_seq BETWEEN g.first_seq AND g.last_seq)
                               > g.last_seq - g.first_seq)
                       AND NOT EXISTS (
                           SELECT 1 FROM awa.lane_commits m
                            CROSS JOIN LATERAL (
                                SELECT 1 FROM awa.ready_entries r
                                 WHERE r.queue = p_queue AND r.priority = v_priority
                                   AND r.shard = v_shard AND r.ready_slot = m.ready_slot
                                   AND r.lane_seq BETWEEN m.first_seq AND m.last_seq
                                   AND r.batch = m.batch
                                   AND NOT EXISTS (
                                       SELECT 1 FROM awa.claim_receipts c
                                        WHERE c.queue = r.queue AND c.priority = r.priority
                                          AND c.shard = r.shard AND c.commit_seq = m.commit_seq
                                          AND c.lane_seq = r.lane_seq
                                          AND c.ready_slot = m.ready_slot)
                                   AND NOT EXISTS (
                                       SELECT 1 FROM awa.ready_tombstones t
                                        WHERE t.queue = r.queue AND t.priority = r.priority
                                          AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                                          AND t.ready_slot = m.ready_slot)
                                 LIMIT 1) r
                            WHERE m.queue = p_queue AND m.priority = v_priority
                              AND m.shard = v_shard
                              AND m.commit_seq BETWEEN g.first_seq AND g.last_seq)
                       AND (NOT p_sequential OR NOT EXISTS (
                           SELECT 1 FROM awa.claim_receipts c
                            WHERE c.queue = p_queue AND c.priority = v_priority
                              AND c.shard = v_shard
                              AND c.commit_seq BETWEEN g.first_seq AND g.last_seq
                              AND NOT EXISTS (
                                  SELECT 1 FROM awa.done_entries d
                                   WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                                     AND d.ready_slot = c.ready_slot)));
                    v_remaining := v_remaining - v_claimed;
                    v_round_claimed := v_round_claimed + v_claimed;
                    EXIT lanes WHEN v_remaining <= 0;
                    CONTINUE lanes WHEN p_sequential AND v_claimed > 0;
                END IF;
                -- A live hole: a position missing while a producer of the lane is still in flight.
                -- Normally a commit a few milliseconds from visible, whose rows come first; but a
                -- transaction that published early (SET CONSTRAINTS ... IMMEDIATE) holds its
                -- position until it ends, however long. Once the commit after a missing position
                -- was drawn more than 250 ms ago (the missing one was drawn before it, and its
                -- producer is in flight since), FIFO yields: the claim may take the lane past every
                -- such position up to the first younger one, and records the positions it passes
                -- (awa.lane_holes) so that a late commit is still claimed, once.
                IF NOT v_settled AND v_at.next_commit > v_commit + 1
                   AND v_at.next_committed_at < now() - interval '250 milliseconds' THEN
                    SELECT coalesce(max(s.commit_seq), 0),
                           array_agg(s.prev_seq + 1 ORDER BY s.commit_seq)
                               FILTER (WHERE s.commit_seq > s.prev_seq + 1),
                           array_agg(s.commit_seq - 1 ORDER BY s.commit_seq)
                               FILTER (WHERE s.commit_seq > s.prev_seq + 1)
                      INTO v_pass_to, v_gap_first, v_gap_last
                      FROM (SELECT g.commit_seq, g.prev_seq,
                                   bool_and(g.commit_seq = g.prev_seq + 1
                                            OR g.committed_at < now() - interval '250 milliseconds')
                                       OVER (ORDER BY g.commit_seq) AS passable
                              FROM (SELECT n.commit_seq, n.committed_at,
                                           lag(n.commit_seq, 1, v_commit)
                                               OVER (ORDER BY n.commit_seq) AS prev_seq
                                      FROM awa.lane_commits n
                                     WHERE n.queue = p_queue AND n.priority = v_priority
                                       AND n.shard = v_shard AND n.commit_seq > v_commit
                                     ORDER BY n.commit_seq
                                     LIMIT v_remaining + 1) g) s
                     WHERE s.passable;
                END IF;
                v_fallback := true;
            END LOOP;
            IF v_pass_to > 0 AND v_claimed > 0 THEN
                -- The missing positions this claim passed: those below the newest it claimed.
                -- Recorded from what the statement before saw missing: one that has appeared
                -- since and was claimed above is found claimed and its range deleted later.
                SELECT c.commit_seq INTO v_claimed_to FROM awa.claim_receipts c
                 WHERE c.queue = p_queue AND c.priority = v_priority AND c.shard = v_shard
                 ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1;
                INSERT INTO awa.lane_holes (queue, priority, shard, first_seq, last_seq)
                SELECT p_queue, v_priority, v_shard, g.first_seq, g.last_seq
                  FROM unnest(v_gap_first, v_gap_last) AS g(first_seq, last_seq)
                 WHERE g.last_seq < v_claimed_to
                ON CONFLICT DO NOTHING;
            END IF;
            -- Fewer rows than the lane could give (a sequential lane gives one): if it has no
            -- head now (this claim took its last rows, or every row left in it was cancelled),
            -- the next mark leaves it out, so the next claim does not visit it to find out.
            -- The usual case, a claim that took the lane's last rows, is answered from its newest
            -- receipt: no row of its commit after it, no commit after it and no hole recorded
            -- (none before the claim, none passed by it; only the holder of the lane's claim
            -- lock records one), so nothing is left. That is read for every such lane at once,
            -- by the statement that appends the mark (migration 0039): a claim crossing lanes of
            -- a few dozen jobs each (django.tasks priorities) took the last rows of a lane on
            -- most claims, and read it in a statement of its own. A lane it finds rows left in
            -- (cancelled ones) stays in the mark, and the next claim that visits it and takes
            -- nothing looks for its head. Only that case looks for the head, which reads far more
            -- (receipts of every row after the cursor, cancelled rows, holes).
            IF v_marked AND v_claimed < (CASE WHEN p_sequential THEN 1 ELSE v_remaining END) THEN
                IF v_claimed > 0 AND NOT v_at.has_holes AND v_pass_to = 0 THEN
                    v_taken := v_taken || (v_priority * 65536 + v_shard);
                ELSIF NOT EXISTS (SELECT 1 FROM awa.lane_head(p_queue, v_priority, v_shard)) THEN
                    v_drained := v_drained || (v_priority * 65536 + v_shard);
                END IF;
            END IF;
            -- Only a bound below the lane's own priority can cut it short of v_remaining.
            v_again := v_again OR (v_claimed < v_remaining AND v_bound < v_priority);
            v_remaining := v_remaining - v_claimed;
            v_round_claimed := v_round_claimed + v_claimed;
            EXIT WHEN v_remaining <= 0;
        END LOOP;
        IF v_ordered THEN
            CLOSE v_order;
        END IF;
        EXIT WHEN v_round_claimed = 0;
    END LOOP;
    -- A new mark when this claim learnt something the newest one does not say: the first
    -- mark, lanes found drained (above, or here: the lanes it took the last rows of), or enough
    -- commits it had not seen that reading them again on every claim would cost more than the
    -- row. Its snapshot is the one the lanes to visit were found in; its lanes are kept in
    -- priority order.
    IF v_marked THEN
        IF NOT v_look.had_mark OR cardinality(v_drained) > 0 OR cardinality(v_taken) > 0
           OR v_look.published >= 32 THEN
            FOR v_i IN 1 .. cardinality(v_drained) LOOP
                v_lanes := array_remove(v_lanes, v_drained[v_i]);
            END LOOP;
            INSERT INTO awa.lane_marks (queue, seen_below, unseen, lanes, shards)
            SELECT p_queue, pg_snapshot_xmax(v_look.snapshot), v_look.unseen, k.lanes,
                   (SELECT coalesce(max(x & 65535), 0) + 1 FROM unnest(k.lanes) AS x)
              FROM (SELECT ARRAY(SELECT x FROM unnest(v_lanes) AS x
                                  WHERE x <> ALL (e.emptied) ORDER BY x) AS lanes,
                           cardinality(e.emptied) AS emptied
                      FROM (SELECT coalesce(array_agg(t.lane) FILTER (WHERE t.emptied), '{}')
                                       AS emptied
                              FROM (
                                  -- In the select list, not the WHERE: each a probe from the
                                  -- lane's newest receipt, never an anti-join whose scans are
                                  -- bounded by the commit alone.
                                  SELECT t.lane,
                                         NOT EXISTS (
                                             SELECT 1 FROM awa.ready_entries r
                                              WHERE r.queue = p_queue AND r.priority = m.priority
                                                AND r.shard = m.shard
                                                AND r.ready_slot = m.ready_slot
                                                AND r.lane_seq > c.lane_seq
                                                AND r.lane_seq <= m.last_seq
                                                AND r.batch = m.batch)
                                         AND NOT EXISTS (
                                             SELECT 1 FROM awa.lane_commits n
                                              WHERE n.queue = p_queue AND n.priority = m.priority
                                                AND n.shard = m.shard
                                                AND n.commit_seq > c.commit_seq) AS emptied
                                    FROM unnest(v_taken) AS t(lane)
                                    -- The lane's newest receipt, this claim's (it holds the
                                    -- lane's claim lock), and the commit it is in: each a
                                    -- probe per lane (LIMIT), not a join of the queue's commits.
                                    CROSS JOIN LATERAL (
                                        SELECT c.commit_seq, c.lane_seq, c.ready_slot
                                          FROM awa.claim_receipts c
                                         WHERE c.queue = p_queue
                                           AND c.priority = (t.lane >> 16)::smallint
                                           AND c.shard = (t.lane & 65535)::smallint
                                         ORDER BY c.commit_seq DESC, c.lane_seq DESC
                                         LIMIT 1) c
                                    CROSS JOIN LATERAL (
                                        SELECT m.priority, m.shard, m.ready_slot, m.last_seq,
                                               m.batch
                                          FROM awa.lane_commits m
                                         WHERE m.queue = p_queue
                                           AND m.priority = (t.lane >> 16)::smallint
                                           AND m.shard = (t.lane & 65535)::smallint
                                           AND m.commit_seq = c.commit_seq
                                           AND m.ready_slot = c.ready_slot
                                         LIMIT 1) m) t) e
                    -- Kept apart, so its array is made once for both columns.
                    OFFSET 0) k
             WHERE NOT v_look.had_mark OR cardinality(v_drained) > 0 OR v_look.published >= 32
                OR k.emptied > 0;
        END IF;
    END IF;
END
$$;

-- Claims like awa.claim_ready, but never more than the queue's fleet-wide token bucket
-- (p_rate jobs per second, p_burst saved up) allows. Returns one row per claimed job (job set,
-- throttled_for_s NULL), then, when the budget rather than the work ran out, one row with a
-- NULL job and the seconds until the next token.
--
-- The budget is read and spent under a transaction-scoped advisory lock per queue, so two
-- claimers can never both spend the same tokens; claims of a fleet-limited queue queue up
-- behind each other for the length of one claim. Times come from clock_timestamp(): now() would
-- be the start of a transaction that may have waited for the lock.
CREATE OR REPLACE FUNCTION awa.claim_ready_limited(
    p_queue text, p_limit integer, p_claimed_by text, p_deadline_s double precision,
    p_aging_s double precision, p_sequential boolean, p_rate double precision, p_burst integer
) RETURNS TABLE (job awa.claimed_job, throttled_for_s double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_full_at timestamptz;
    v_debt_s double precision;
    v_allowed integer;
    v_claimed integer := 0;
BEGIN
    -- 1096237396 = 'AWAT': the rate-limit lock class.
    PERFORM pg_advisory_xact_lock(1096237396, hashtext(p_queue));
    v_now := clock_timestamp();
    SELECT l.full_at INTO v_full_at FROM awa.rate_ledger l
     WHERE l.queue = p_queue ORDER BY l.entry DESC LIMIT 1;
    v_debt_s := greatest(extract(epoch FROM coalesce(v_full_at, v_now) - v_now), 0);
    v_allowed := least(p_limit, floor(p_burst - v_debt_s * p_rate)::integer);
    IF v_allowed > 0 THEN
        RETURN QUERY SELECT c, NULL::double precision
                       FROM awa.claim_ready(p_queue, v_allowed, p_claimed_by, p_deadline_s,
                                            p_aging_s, p_sequential) c;
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
        IF v_claimed > 0 THEN
            INSERT INTO awa.rate_ledger (queue, claimed_at, jobs, full_at)
            VALUES (p_queue, v_now, v_claimed,
                    v_now + make_interval(secs => v_debt_s + v_claimed / p_rate));
        END IF;
    END IF;
    -- Throttled only when the claim took every job the budget allowed: fewer means the queue
    -- ran out of work first.
    IF v_allowed < p_limit AND v_claimed = greatest(v_allowed, 0) THEN
        RETURN QUERY SELECT NULL::awa.claimed_job,
                            greatest(v_debt_s + v_claimed / p_rate - (p_burst - 1) / p_rate,
                                     0.001);
    END IF;
END
$$;
