-- Reverse of migration 0011_lane_marks: awa.claim_ready, awa.claim_order and awa.lane_has_work
-- as migration 0006 left them (the static order of a queue with more than 4 lanes per shard
-- probes every lane), the lane marks and their index on lane_commits dropped.
DROP FUNCTION awa.claim_order(text, double precision, integer[]);
DROP INDEX awa.lane_commits_batch;
DROP TABLE awa.lane_marks;

CREATE OR REPLACE FUNCTION awa.lane_has_work(p_queue text, p_priority smallint, p_shard smallint)
RETURNS TABLE (has_work boolean) LANGUAGE sql STABLE AS $$
    SELECT true
      FROM (SELECT m.commit_seq, m.last_seq FROM awa.lane_commits m
             WHERE m.queue = p_queue AND m.priority = p_priority AND m.shard = p_shard
             ORDER BY m.commit_seq DESC LIMIT 1) m
      LEFT JOIN LATERAL (
          SELECT c.commit_seq, c.lane_seq FROM awa.claim_receipts c
           WHERE c.queue = p_queue AND c.priority = p_priority AND c.shard = p_shard
           ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
     WHERE m.commit_seq > coalesce(c.commit_seq, 0) OR m.last_seq > c.lane_seq
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
           AND (v_lanes <= 4 * v_shards
                OR EXISTS (SELECT 1 FROM awa.lane_has_work(l.queue, l.priority, l.shard)))
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

CREATE OR REPLACE FUNCTION awa.claim_ready(p_queue text, p_limit integer, p_claimed_by text,
                                p_deadline_s double precision, p_aging_s double precision,
                                p_sequential boolean)
RETURNS SETOF awa.claimed_job LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    v_lane record;
    v_at record;
    v_commit bigint;
    v_expect bigint;
    v_settled boolean;
    v_remaining integer := p_limit;
    v_claimed integer;
    v_round_claimed integer;
    v_again boolean := true;
BEGIN
    IF EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = p_queue AND m.paused) THEN
        RETURN;
    END IF;
    WHILE v_again AND v_remaining > 0 LOOP
        v_again := false;
        v_round_claimed := 0;
        FOR v_lane IN SELECT * FROM awa.claim_order(p_queue, p_aging_s) LOOP
            -- An advisory lock, not a row lock on queue_lanes: a row lock would give even an
            -- empty claim a transaction id and a WAL record, so every idle poll would wait for
            -- a WAL flush on a durable server. Locks taken in an earlier round are ours already.
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(
                1096237379, awa.lane_lock_key(p_queue, v_lane.priority, v_lane.shard));
            -- The cursor, the commit it is in (in the receipt's slot: a commit shares the slot
            -- of its rows) and the next published position after it.
            SELECT c.commit_seq, c.lane_seq, c.job_id, c.run_lease, c.ready_slot, m.batch,
                   m.last_seq,
                   (SELECT n.commit_seq FROM awa.lane_commits n
                     WHERE n.queue = p_queue AND n.priority = v_lane.priority
                       AND n.shard = v_lane.shard AND n.commit_seq > coalesce(c.commit_seq, 0)
                     ORDER BY n.commit_seq LIMIT 1) AS next_commit
              INTO v_at
              FROM (SELECT 1) AS one
              LEFT JOIN LATERAL (
                  SELECT c.commit_seq, c.lane_seq, c.job_id, c.run_lease, c.ready_slot
                    FROM awa.claim_receipts c
                   WHERE c.queue = p_queue AND c.priority = v_lane.priority
                     AND c.shard = v_lane.shard
                   ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
              LEFT JOIN LATERAL (
                  SELECT m.batch, m.last_seq FROM awa.lane_commits m
                   WHERE m.queue = p_queue AND m.priority = v_lane.priority
                     AND m.shard = v_lane.shard AND m.commit_seq = c.commit_seq
                     AND m.ready_slot = c.ready_slot
                   LIMIT 1) m ON true;
            -- Nothing published after the cursor and nothing left in its commit: the lane is
            -- drained, and an empty claim reads no further.
            CONTINUE WHEN v_at.next_commit IS NULL
                      AND (v_at.batch IS NULL OR v_at.lane_seq >= v_at.last_seq);
            v_commit := coalesce(v_at.commit_seq, 0);
            -- Inside an IF, not folded into a CONTINUE condition: an expression's plan is set
            -- up whole even when AND short-circuits, which locked every partition of two more
            -- ring tables on every claim of every queue.
            IF p_sequential AND v_at.job_id IS NOT NULL THEN
                CONTINUE WHEN NOT EXISTS (
                    SELECT 1 FROM awa.done_entries d
                     WHERE d.job_id = v_at.job_id AND d.run_lease = v_at.run_lease
                       AND d.ready_slot = v_at.ready_slot);
            END IF;
            v_settled := false;
            IF v_at.next_commit > v_commit + 1 THEN
                v_settled := pg_try_advisory_xact_lock(
                    1096237388, awa.lane_lock_key(p_queue, v_lane.priority, v_lane.shard));
            END IF;
            -- Commits are numbered from the cursor's own (when it still holds rows to claim) or
            -- from the one after it; those whose position is that number plus their rank have
            -- no hole before them.
            v_expect := v_commit - CASE WHEN v_at.batch IS NULL THEN 0 ELSE 1 END;
            RETURN QUERY
            WITH usable AS (
                SELECT u.commit_seq, u.ready_slot, u.batch, u.first_seq, u.last_seq FROM (
                    SELECT n.commit_seq, n.ready_slot, n.batch,
                           CASE WHEN n.commit_seq = v_commit THEN v_at.lane_seq + 1
                                ELSE n.first_seq END AS first_seq,
                           n.last_seq,
                           n.commit_seq - row_number() OVER (ORDER BY n.commit_seq) AS behind
                      FROM awa.lane_commits n
                     WHERE n.queue = p_queue AND n.priority = v_lane.priority
                       AND n.shard = v_lane.shard AND n.commit_seq >= v_commit
                     ORDER BY n.commit_seq
                     LIMIT v_remaining + 1) u
                 WHERE v_settled OR u.behind = v_expect
            ), candidates AS (
                SELECT u.commit_seq, r.*,
                       awa.effective_priority(r.priority, r.run_at, p_aging_s) AS effective
                  FROM usable u
                  CROSS JOIN LATERAL (
                      -- A commit's rows are in its own slot: stated, it prunes the other
                      -- slots' partitions of both tables from each commit's probe.
                      SELECT r.* FROM awa.ready_entries r
                       WHERE r.queue = p_queue AND r.priority = v_lane.priority
                         AND r.shard = v_lane.shard AND r.ready_slot = u.ready_slot
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
                 ORDER BY u.commit_seq, r.lane_seq
                 LIMIT CASE WHEN p_sequential THEN 1 ELSE v_remaining END
            ), picked AS (
                -- The lane's FIFO prefix within the bound: the first row past it ends the take.
                SELECT * FROM (
                    SELECT c.*, bool_and(c.effective <= v_lane.bound)
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
            SELECT p.queue, p.priority, p.shard, p.lane_seq, p.ready_slot, p.job_id, p.kind,
                   p.args, p.attempt + 1, p.run_lease + 1, p.max_attempts, p.run_at,
                   p.created_at, p.metadata, p.tags, p.errors, s.progress, s.checkpoint
              FROM picked p
              -- A probe per claimed row (see awa.close_attempts on LATERAL ... LIMIT 1).
              LEFT JOIN LATERAL (
                  SELECT s.progress, s.checkpoint FROM awa.attempt_state s
                   WHERE s.job_id = p.job_id LIMIT 1) s ON true
             ORDER BY p.commit_seq, p.lane_seq;
            GET DIAGNOSTICS v_claimed = ROW_COUNT;
            -- Only a bound below the lane's own priority can cut it short of v_remaining.
            v_again := v_again OR (v_claimed < v_remaining AND v_lane.bound < v_lane.priority);
            v_remaining := v_remaining - v_claimed;
            v_round_claimed := v_round_claimed + v_claimed;
            EXIT WHEN v_remaining <= 0;
        END LOOP;
        EXIT WHEN v_round_claimed = 0;
    END LOOP;
END
$$;
