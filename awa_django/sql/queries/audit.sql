-- The invariant audit (manage.py awa_audit): each block reads the substrate and returns the
-- number of jobs that break one invariant and the first 100 of their ids. Read-only: run in
-- one REPEATABLE READ READ ONLY transaction, so every block sees the same snapshot.

-- name: unclaimed
-- Ready row r is neither claimed nor cancelled (no receipt, no tombstone in its place).
NOT EXISTS (
               SELECT 1 FROM awa.claim_receipts c
                WHERE c.queue = r.queue AND c.priority = r.priority AND c.shard = r.shard
                  AND c.lane_seq = r.lane_seq AND c.ready_slot = r.ready_slot)
       AND NOT EXISTS (
               SELECT 1 FROM awa.ready_tombstones t
                WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                  AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)

-- name: unclosed
-- Receipt c has no closure: its attempt is open.
NOT EXISTS (SELECT 1 FROM awa.done_entries d
            WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease)

-- name: broken_jobs
-- The answer of a block whose CTE `broken` lists the job ids that break its invariant.
SELECT count(*), coalesce((array_agg(job_id ORDER BY job_id))[1:100], '{}') FROM broken

-- name: audit_one_place
-- Every job is in at most one live place: ready and unclaimed, claimed with an open receipt
-- (running or waiting on a callback), deferred (scheduled, retryable, snoozed) or in the DLQ.
-- A job in none of them is done or purged, which the view awa.jobs reads.
WITH live AS (
    SELECT r.job_id FROM awa.ready_entries r
     WHERE {{unclaimed}}
    UNION ALL
    SELECT c.job_id FROM awa.claim_receipts c
     WHERE {{unclosed}}
    UNION ALL
    SELECT f.job_id FROM awa.deferred_jobs f
    UNION ALL
    SELECT q.job_id FROM awa.dlq_entries q
), broken AS (
    SELECT l.job_id FROM live l
     WHERE NOT EXISTS (SELECT 1 FROM awa.purged_jobs p WHERE p.job_id = l.job_id)
     GROUP BY l.job_id HAVING count(*) > 1
)
{{broken_jobs}}

-- name: audit_one_open_attempt
-- No job has two open attempts: two receipts without a closure, or a heartbeat lease with no
-- open receipt of its own (an attempt that was closed but still beats, or never was claimed).
WITH broken AS (
    SELECT c.job_id FROM awa.claim_receipts c
     WHERE {{unclosed}}
     GROUP BY c.job_id HAVING count(*) > 1
    UNION
    SELECT x.job_id FROM awa.leases x
     WHERE NOT EXISTS (
               SELECT 1 FROM awa.claim_receipts c
                WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease
                  AND {{unclosed}})
)
{{broken_jobs}}

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
       AND {{unclaimed}}
)
{{broken_jobs}}

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
       AND {{unclaimed}}
       AND NOT EXISTS (
               SELECT 1 FROM awa.lane_holes g
                WHERE g.queue = m.queue AND g.priority = m.priority AND g.shard = m.shard
                  AND m.commit_seq BETWEEN g.first_seq AND g.last_seq)
)
{{broken_jobs}}

-- name: audit_ring_cursor
-- Each ring (queue, lease) has exactly one current slot, and its slots were current in turn:
-- the ledger is not empty, names slots inside the ring, and its retained generations are
-- consecutive, each on the slot after the one before. Reports the ledger generations that
-- break it (none for a ring with no ledger row or no ring_config row: counted, no id).
WITH ledger AS (
    SELECT 'queue'::text AS ring, generation, slot FROM awa.queue_ring_rotations
    UNION ALL
    SELECT 'lease'::text, generation, slot FROM awa.lease_ring_rotations
), rings AS (
    SELECT r.ring, c.slot_count, min(l.generation) AS oldest, count(l.generation) AS kept
      FROM (VALUES ('queue'), ('lease')) AS r(ring)
      LEFT JOIN awa.ring_config c ON c.ring = r.ring
      LEFT JOIN ledger l ON l.ring = r.ring
     GROUP BY r.ring, c.slot_count
), broken AS (
    SELECT l.generation FROM ledger l JOIN rings g ON g.ring = l.ring
     WHERE g.slot_count IS NULL
        OR l.slot NOT BETWEEN 0 AND g.slot_count - 1
        OR (l.generation > g.oldest
            AND NOT EXISTS (SELECT 1 FROM ledger p
                             WHERE p.ring = l.ring AND p.generation = l.generation - 1
                               AND (p.slot + 1) % g.slot_count = l.slot))
    UNION ALL
    SELECT NULL FROM rings g WHERE g.kept = 0 OR g.slot_count IS NULL
)
SELECT count(*),
       coalesce((array_agg(generation ORDER BY generation)
                 FILTER (WHERE generation IS NOT NULL))[1:100], '{}')
  FROM broken

-- name: audit_ring_slots
-- Nothing in the queue ring outlived its slot's truncation: rotation enters a slot only once
-- prune has emptied it, so every ready row was written in its slot's current lap (its
-- ready_generation is neither before the newest generation on its slot nor after the ring's
-- cursor, and the ledger puts that generation on that slot). A receipt, closure or tombstone
-- sits in the slot of its ready row, so one truncate removes them together: one whose ready
-- row is not there was left behind by a truncate, or written to the wrong slot.
WITH cursor AS (
    SELECT max(generation) AS generation FROM awa.queue_ring_rotations
), laps AS (
    SELECT slot, max(generation) AS since FROM awa.queue_ring_rotations GROUP BY slot
), broken AS (
    SELECT r.job_id FROM awa.ready_entries r
      CROSS JOIN cursor k
      LEFT JOIN laps p ON p.slot = r.ready_slot
     WHERE p.since IS NULL
        OR r.ready_generation < p.since
        OR r.ready_generation > k.generation
        OR EXISTS (SELECT 1 FROM awa.queue_ring_rotations g
                    WHERE g.generation = r.ready_generation AND g.slot <> r.ready_slot)
    UNION
    SELECT x.job_id FROM (
        SELECT queue, priority, shard, lane_seq, ready_slot, job_id FROM awa.claim_receipts
        UNION ALL
        SELECT queue, priority, shard, lane_seq, ready_slot, job_id FROM awa.done_entries
        UNION ALL
        SELECT queue, priority, shard, lane_seq, ready_slot, job_id FROM awa.ready_tombstones
    ) x
     WHERE NOT EXISTS (
               SELECT 1 FROM awa.ready_entries r
                WHERE r.queue = x.queue AND r.priority = x.priority AND r.shard = x.shard
                  AND r.lane_seq = x.lane_seq AND r.ready_slot = x.ready_slot
                  AND r.job_id = x.job_id)
)
{{broken_jobs}}

-- name: audit_unique_claims
-- Unique claims match the jobs that hold them. The primary key already makes a key held by
-- one claim; what can go wrong is the holder: a job holding two keys (a takeover that left
-- the old claim, or a claim recorded twice), a claim naming a job of another kind, or one
-- naming a job id never issued. A claim whose holder was pruned or purged is released, not
-- broken: the next enqueue of the key takes it over and the sweep deletes it.
WITH issued AS (
    SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END AS last_id
      FROM awa.job_id_seq
), broken AS (
    SELECT c.job_id FROM awa.unique_claims c GROUP BY c.job_id HAVING count(*) > 1
    UNION
    SELECT c.job_id FROM awa.unique_claims c
      JOIN awa.jobs j ON j.job_id = c.job_id
     WHERE j.kind <> c.kind
    UNION
    SELECT c.job_id FROM awa.unique_claims c CROSS JOIN issued i WHERE c.job_id > i.last_id
)
{{broken_jobs}}

-- name: audit_workflow_steps
-- Each held workflow step waits for exactly its unfinished dependencies: its remaining_deps
-- equals its dependencies that have not completed (or ended in failure it ignores), none of
-- them failed in a way that should have cancelled it, and a step (not the on_failure one)
-- left with none to wait for has been released. A counter off by one holds a step forever or
-- releases it early. Reports the steps' job ids.
WITH deps AS (
    SELECT s.job_id, s.remaining_deps, s.on_failure,
           count(e.from_step) FILTER (
               WHERE f.state IS DISTINCT FROM 'completed'
                 AND NOT (e.ignore_failure AND f.state IN ('failed', 'cancelled', 'skipped'))
           ) AS unfinished,
           count(e.from_step) FILTER (
               WHERE NOT e.ignore_failure AND f.state IN ('failed', 'cancelled', 'skipped')
           ) AS fatal
      FROM awa.workflow_steps s
      LEFT JOIN awa.workflow_edges e
        ON e.workflow_id = s.workflow_id AND e.to_step = s.name
      LEFT JOIN awa.workflow_steps f
        ON f.workflow_id = e.workflow_id AND f.name = e.from_step
     WHERE s.state = 'held'
     GROUP BY s.job_id, s.remaining_deps, s.on_failure
), broken AS (
    SELECT d.job_id FROM deps d
     WHERE d.remaining_deps <> d.unfinished
        OR d.fatal > 0
        OR (d.remaining_deps = 0 AND NOT d.on_failure)
)
{{broken_jobs}}

-- name: audit_workflow_state
-- No running workflow is stuck or miscounted: its unfinished count equals its steps (the
-- on_failure one aside) that have not ended, and some step is still to end (held, released,
-- or parked in the dead-letter queue), else nothing would ever finish it. Reports workflow
-- ids.
WITH counted AS (
    SELECT w.workflow_id, w.unfinished,
           count(*) FILTER (WHERE NOT s.on_failure
                              AND s.state IN ('held', 'released', 'dead_lettered')) AS open,
           count(*) FILTER (WHERE s.state IN ('released', 'dead_lettered')
                               OR (s.state = 'held' AND NOT s.on_failure)) AS pending
      FROM awa.workflows w
      LEFT JOIN awa.workflow_steps s ON s.workflow_id = w.workflow_id
     WHERE w.state = 'running'
     GROUP BY w.workflow_id, w.unfinished
), broken AS (
    SELECT c.workflow_id FROM counted c WHERE c.unfinished <> c.open OR c.pending = 0
)
SELECT count(*), coalesce((array_agg(workflow_id ORDER BY workflow_id))[1:100], '{}')
  FROM broken

-- name: read_only_snapshot
-- Run first in the audit's own transaction: every invariant is read from one snapshot, and the
-- audit writes nothing.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY
