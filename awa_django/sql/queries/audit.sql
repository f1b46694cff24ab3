-- The invariant audit (manage.py awa_audit): each block reads the substrate and returns the
-- number of jobs that break one invariant and the first 100 of their ids. Read-only: run in
-- one REPEATABLE READ READ ONLY transaction, so every block sees the same snapshot.

-- name: audit_one_place
-- Every job is in at most one live place: ready and unclaimed, claimed with an open receipt
-- (running or waiting on a callback), deferred (scheduled, retryable, snoozed) or in the DLQ.
-- A job in none of them is done or purged, which the view awa.jobs reads.
WITH live AS (
    SELECT r.job_id FROM awa.ready_entries r
     WHERE NOT EXISTS (
               SELECT 1 FROM awa.claim_receipts c
                WHERE c.queue = r.queue AND c.priority = r.priority AND c.shard = r.shard
                  AND c.lane_seq = r.lane_seq AND c.ready_slot = r.ready_slot)
       AND NOT EXISTS (
               SELECT 1 FROM awa.ready_tombstones t
                WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                  AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
    UNION ALL
    SELECT c.job_id FROM awa.claim_receipts c
     WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries d
                        WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease)
    UNION ALL
    SELECT f.job_id FROM awa.deferred_jobs f
    UNION ALL
    SELECT q.job_id FROM awa.dlq_entries q
), broken AS (
    SELECT l.job_id FROM live l
     WHERE NOT EXISTS (SELECT 1 FROM awa.purged_jobs p WHERE p.job_id = l.job_id)
     GROUP BY l.job_id HAVING count(*) > 1
)
SELECT count(*), coalesce((array_agg(job_id ORDER BY job_id))[1:100], '{}') FROM broken

-- name: audit_one_open_attempt
-- No job has two open attempts: two receipts without a closure, or a heartbeat lease with no
-- open receipt of its own (an attempt that was closed but still beats, or never was claimed).
WITH broken AS (
    SELECT c.job_id FROM awa.claim_receipts c
     WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries d
                        WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease)
     GROUP BY c.job_id HAVING count(*) > 1
    UNION
    SELECT x.job_id FROM awa.leases x
     WHERE NOT EXISTS (
               SELECT 1 FROM awa.claim_receipts c
                WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease
                  AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                   WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease))
)
SELECT count(*), coalesce((array_agg(job_id ORDER BY job_id))[1:100], '{}') FROM broken

-- name: audit_published
-- Every committed ready row that is neither claimed nor cancelled is in its lane's order: a
-- lane_commits row of its transaction covers it. One that is not would never be claimed.
WITH broken AS (
    SELECT DISTINCT r.job_id FROM awa.ready_entries r
     WHERE NOT EXISTS (
               SELECT 1 FROM awa.lane_commits m
                WHERE m.queue = r.queue AND m.priority = r.priority AND m.shard = r.shard
                  AND m.ready_slot = r.ready_slot AND m.batch = r.batch
                  AND r.lane_seq BETWEEN m.first_seq AND m.last_seq)
       AND NOT EXISTS (
               SELECT 1 FROM awa.claim_receipts c
                WHERE c.queue = r.queue AND c.priority = r.priority AND c.shard = r.shard
                  AND c.lane_seq = r.lane_seq AND c.ready_slot = r.ready_slot)
       AND NOT EXISTS (
               SELECT 1 FROM awa.ready_tombstones t
                WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                  AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
)
SELECT count(*), coalesce((array_agg(job_id ORDER BY job_id))[1:100], '{}') FROM broken

-- name: audit_claimable
-- No hole that never closes: every unclaimed, uncancelled row of a lane lies ahead of the
-- lane's cursor (its newest receipt), or in a commit that arrived late in a recorded hole
-- (awa.lane_holes), which claims take first. A row behind the cursor otherwise is never
-- claimed.
WITH cursors AS (
    SELECT DISTINCT ON (c.queue, c.priority, c.shard)
           c.queue, c.priority, c.shard, c.commit_seq, c.lane_seq
      FROM awa.claim_receipts c
     ORDER BY c.queue, c.priority, c.shard, c.commit_seq DESC, c.lane_seq DESC
), broken AS (
    SELECT DISTINCT r.job_id
      FROM cursors k
      JOIN awa.lane_commits m
        ON m.queue = k.queue AND m.priority = k.priority AND m.shard = k.shard
       AND m.commit_seq <= k.commit_seq
      JOIN awa.ready_entries r
        ON r.queue = m.queue AND r.priority = m.priority AND r.shard = m.shard
       AND r.ready_slot = m.ready_slot AND r.batch = m.batch
       AND r.lane_seq BETWEEN m.first_seq AND m.last_seq
     WHERE (m.commit_seq, r.lane_seq) < (k.commit_seq, k.lane_seq)
       AND NOT EXISTS (
               SELECT 1 FROM awa.claim_receipts c
                WHERE c.queue = r.queue AND c.priority = r.priority AND c.shard = r.shard
                  AND c.lane_seq = r.lane_seq AND c.ready_slot = r.ready_slot)
       AND NOT EXISTS (
               SELECT 1 FROM awa.ready_tombstones t
                WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                  AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
       AND NOT EXISTS (
               SELECT 1 FROM awa.lane_holes g
                WHERE g.queue = m.queue AND g.priority = m.priority AND g.shard = m.shard
                  AND m.commit_seq BETWEEN g.first_seq AND g.last_seq)
)
SELECT count(*), coalesce((array_agg(job_id ORDER BY job_id))[1:100], '{}') FROM broken
