-- Read-only listings for operator surfaces (the admin): pages of jobs and a job's attempts.

-- name: plan_without_jit
-- For the rest of the transaction only (is_local): see storage/browse.py. Answers the setting
-- it replaced, read by the materialized CTE before the row's set_config runs.
WITH before AS MATERIALIZED (SELECT current_setting('jit') AS jit)
SELECT jit, set_config('jit', 'off', true) FROM before

-- name: restore_jit
-- Puts back, for the rest of the caller's transaction, the setting plan_without_jit replaced.
SELECT set_config('jit', %(jit)s, true)

-- name: plan_as_walk
-- For the rest of the transaction only (is_local): no hash or merge joins, so a capped count
-- walks its state's ids down their index, probing each, and stops at the cap; see
-- storage/browse.py. Answers the settings it replaced, read before the set_config calls run.
WITH before AS MATERIALIZED (
    SELECT current_setting('enable_hashjoin') AS hash, current_setting('enable_mergejoin') AS merge
)
SELECT hash, merge, set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true)
  FROM before

-- name: restore_joins
-- Puts back, for the rest of the caller's transaction, the settings plan_as_walk replaced.
SELECT set_config('enable_hashjoin', %(hash)s, true), set_config('enable_mergejoin', %(merge)s, true)

-- name: plan_as_name_walk
-- For the rest of the transaction only (is_local): sorting planned as a last resort, so
-- available_job_ids_by_name_bounded walks the name index of every partition in order and
-- stops at its bound rather than sort all of a pair's rows (the plan chosen when the
-- statistics say the pair holds few); see storage/browse.py. Answers the setting it replaced.
WITH before AS MATERIALIZED (SELECT current_setting('enable_sort') AS sort)
SELECT sort, set_config('enable_sort', 'off', true) FROM before

-- name: restore_sort
-- Puts back, for the rest of the caller's transaction, the setting plan_as_name_walk replaced.
SELECT set_config('enable_sort', %(sort)s, true)

-- name: plan_as_merge
-- For the rest of the transaction only (is_local): joins as merges of index walks, so
-- failed_job_ids walks the closures, the DLQ and the purge markers together down their job_id
-- indexes (no hash or nested-loop join, sorting as a last resort); see storage/browse.py.
-- Answers the settings it replaced.
WITH before AS MATERIALIZED (
    SELECT current_setting('enable_hashjoin') AS hash,
           current_setting('enable_nestloop') AS nestloop, current_setting('enable_sort') AS sort
)
SELECT hash, nestloop, sort, set_config('enable_hashjoin', 'off', true),
       set_config('enable_nestloop', 'off', true), set_config('enable_sort', 'off', true)
  FROM before

-- name: restore_merge
-- Puts back, for the rest of the caller's transaction, the settings plan_as_merge replaced.
SELECT set_config('enable_hashjoin', %(hash)s, true),
       set_config('enable_nestloop', %(nestloop)s, true), set_config('enable_sort', %(sort)s, true)

-- name: bound_statements
-- Caps every later statement at %(timeout)s (statement_timeout) for the session, or with
-- %(local)s for the rest of the caller's transaction only: see storage/browse.py. Answers the
-- setting it replaced, read by the materialized CTE before the row's set_config runs.
WITH before AS MATERIALIZED (SELECT current_setting('statement_timeout') AS timeout)
SELECT timeout, set_config('statement_timeout', %(timeout)s, %(local)s) FROM before

-- name: restore_statement_timeout
SELECT set_config('statement_timeout', %(timeout)s, %(local)s)

-- name: job_id_window
-- The newest distinct job ids below a keyset cursor, from the four tables that hold a job's
-- body (every claim and closure joins a ready row, so they cover the awa.jobs view), for a page
-- in any state. Each arm walks its job_id index backwards and stops after `size` ids, so a page
-- costs the same at any table size; no arm counts. A kind or queue filter reads
-- job_id_window_by_name instead (below).
SELECT job_id FROM (
    (SELECT DISTINCT r.job_id FROM awa.ready_entries r
      WHERE r.job_id < %(before)s
      ORDER BY r.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT f.job_id FROM awa.deferred_jobs f
      WHERE f.job_id < %(before)s
      ORDER BY f.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT h.job_id FROM awa.terminal_history h
      WHERE h.job_id < %(before)s
      ORDER BY h.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT q.job_id FROM awa.dlq_entries q
      WHERE q.job_id < %(before)s
      ORDER BY q.job_id DESC LIMIT %(size)s)
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: running_attempts
-- The open attempts (claims without a closure), newest claim first, with their worker, elapsed
-- time's start and saved progress, for "what is running right now". The open claims are
-- found by awa.open_attempts (the leases and the claims since the last rescue pass, each probed
-- for its closure), then each is probed by primary key for its kind: never a join of claims to
-- ready rows (see open_attempt_job_ids).
WITH open AS MATERIALIZED (
    SELECT c.claimed_by, c.job_id, c.queue, c.priority, c.shard, c.lane_seq, c.ready_slot,
           c.run_lease, c.attempt, c.claimed_at, c.deadline_at
      FROM awa.open_attempts() c
)
SELECT o.claimed_by, o.job_id,
       (SELECT r.kind FROM awa.ready_entries r
         WHERE r.queue = o.queue AND r.priority = o.priority AND r.shard = o.shard
           AND r.lane_seq = o.lane_seq AND r.ready_slot = o.ready_slot
         LIMIT 1) AS kind,
       o.queue, o.attempt, o.claimed_at, o.deadline_at,
       (SELECT s.progress FROM awa.attempt_state s
         WHERE s.job_id = o.job_id AND s.run_lease = o.run_lease) AS progress
  FROM open o
 ORDER BY o.claimed_at DESC, o.job_id DESC
 LIMIT %(limit)s

-- name: job_attempts
-- Every attempt of one job that started, oldest first: its claim and, once closed, how it
-- ended. A closure sits in the same ring slot as its claim, so both go when the slot is pruned.
SELECT c.attempt, c.run_lease, c.claimed_by, c.claimed_at, c.deadline_at, d.outcome,
       d.finalized_at, d.error
  FROM awa.claim_receipts c
  LEFT JOIN awa.done_entries d
    ON d.job_id = c.job_id AND d.run_lease = c.run_lease AND d.ready_slot = c.ready_slot
 WHERE c.job_id = %(job_id)s
 ORDER BY c.run_lease

-- name: job_progress
-- A job's saved progress and checkpoint: kept in attempt_state while the job lives, copied into
-- terminal_history when its failed or cancelled record outlives its ring slot.
SELECT progress, checkpoint, updated_at FROM awa.attempt_state WHERE job_id = %(job_id)s
UNION ALL
SELECT progress, checkpoint, finalized_at FROM awa.terminal_history WHERE job_id = %(job_id)s
 LIMIT 1

-- The *_job_ids blocks below list, newest first, the ids of the jobs whose current state is one
-- state, each read from the table that holds that state rather than by filtering a window of
-- the awa.jobs view: a rare state deep in a long history is on page 1. Each walks a job_id
-- index backwards from a keyset cursor (`before`) and stops after `size` ids; the NOT EXISTS
-- probes say "no newer fact", by primary key or a job_id index. A kind or queue filter reads
-- the block of the same name with _by_name (below). The positions they compare follow awa.jobs (a ready row at run_lease L ranks
-- after a closure at L; a deferred or DLQ row is always a job's newest fact while it exists).

-- name: ready_row_probes
-- Whether ready row r's attempt was claimed, and whether it was cancelled (a tombstone), each
-- true or NULL: scalar probes by primary key for the select list of a walk, run only for the
-- rows the walk reaches.
(SELECT true FROM awa.claim_receipts c
  WHERE c.job_id = r.job_id AND c.queue = r.queue AND c.priority = r.priority
    AND c.shard = r.shard AND c.lane_seq = r.lane_seq
    AND c.ready_slot = r.ready_slot LIMIT 1) AS claimed,
(SELECT true FROM awa.ready_tombstones t
  WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
    AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
  LIMIT 1) AS tombstoned

-- name: available_job_ids
-- Ready rows never claimed and never tombstoned. The walk newest first probes each ready row
-- below the cursor by primary key (in the select list of a subquery kept apart by OFFSET 0, so
-- no probe becomes a hash of every claim) and stops at the page's size: the waiting jobs are
-- usually the newest. It reads at most the newest 10,000 ready rows, though: when those do
-- not fill the page (claimed rows above the waiting ones: a drained hot lane on top of a
-- backlog, or the last pages of a bulk walk), the rest comes from what waits below them
-- (awa.waiting_entries, after each lane's claim cursor) instead of a walk on through every
-- claimed row of the ring (issue #36).
WITH found AS MATERIALIZED (
    SELECT DISTINCT w.job_id FROM (
        SELECT r.job_id, {{ready_row_probes}}
          FROM awa.ready_entries r
         WHERE r.job_id < %(before)s
         ORDER BY r.job_id DESC LIMIT 10000 OFFSET 0) w
     WHERE w.claimed IS NULL AND w.tombstoned IS NULL
     ORDER BY w.job_id DESC LIMIT %(size)s
), bottom AS MATERIALIZED (
    -- The walk's last row when it read to the cap (else none: it read every row below the
    -- cursor), read only when the walk did not fill the page.
    SELECT r.job_id FROM awa.ready_entries r
     WHERE r.job_id < %(before)s AND (SELECT count(*) FROM found) < %(size)s
     ORDER BY r.job_id DESC OFFSET 9999 LIMIT 1
)
SELECT f.job_id FROM found f
-- A job of several ready rows (its retries) may have one on each side of the walk's last row.
UNION
(SELECT w.job_id FROM bottom b
  CROSS JOIN LATERAL (SELECT w.job_id FROM awa.waiting_entries(NULL) w
                       WHERE w.job_id <= b.job_id
                       ORDER BY w.job_id DESC LIMIT %(size)s) w)
 ORDER BY 1 DESC LIMIT %(size)s

-- name: count_available
-- How many jobs are available, counting at most %(size)s (given a pair, `queue` and `kind` not
-- NULL, only that pair's): the rows awa.waiting_entries reads after each lane's claim cursor,
-- as a claim finds them, not every ready row probed for its claim.
SELECT count(*) FROM (
    SELECT 1 FROM awa.waiting_entries(%(queue)s::text) w
     WHERE %(queue)s::text IS NULL OR w.kind = %(kind)s::text
     LIMIT %(size)s
) waiting

-- name: open_attempt_job_ids
-- Claims with no closure yet: `running`, or `waiting_external` (when %(waiting)s) while the
-- attempt's lease holds an unresumed callback, exactly as the view tells them apart.
-- Given a pair (`queue` and `kind` not NULL), only that pair's attempts.
-- The open claims are found first by awa.open_attempts (the leases and the claims since the
-- last complete rescue pass, each probed for its closure: not the whole history) and
-- materialized; only those few are then probed, one primary-key lookup each, for their kind
-- and lease. As a join of claims to ready rows, a hot lane (one queue, priority and shard
-- holding tens of thousands of claims) let the planner merge the two on (queue, priority,
-- shard) alone, which compared every claim of the lane with every ready row of it (issue #36:
-- minutes at 28,000).
WITH open AS MATERIALIZED (
    SELECT c.job_id, c.run_lease, c.queue, c.priority, c.shard, c.lane_seq, c.ready_slot
      FROM awa.open_attempts() c
     WHERE c.job_id < %(before)s
       AND (%(queue)s::text IS NULL OR c.queue = %(queue)s::text)
)
SELECT DISTINCT o.job_id FROM open o
 WHERE (%(queue)s::text IS NULL
        OR (SELECT r.kind FROM awa.ready_entries r
             WHERE r.queue = o.queue AND r.priority = o.priority AND r.shard = o.shard
               AND r.lane_seq = o.lane_seq AND r.ready_slot = o.ready_slot
             LIMIT 1) = %(kind)s::text)
   AND %(waiting)s = EXISTS (SELECT 1 FROM awa.leases x
                              WHERE x.job_id = o.job_id AND x.run_lease = o.run_lease
                                AND x.callback_id IS NOT NULL AND x.callback_resumed_at IS NULL)
 ORDER BY o.job_id DESC LIMIT %(size)s

-- name: deferred_job_ids
-- `scheduled` or `retryable` (%(state)s): the backlog row is the job's newest fact.
SELECT f.job_id FROM awa.deferred_jobs f
 WHERE f.job_id < %(before)s AND f.state = %(state)s
 ORDER BY f.job_id DESC LIMIT %(size)s

-- name: dlq_job_ids
SELECT q.job_id FROM awa.dlq_entries q
 WHERE q.job_id < %(before)s
 ORDER BY q.job_id DESC LIMIT %(size)s

-- name: closure_is_newest
-- Closure d is its job's newest fact (no retry's ready row, backlog, DLQ row or purge marker
-- follows it) and, given a pair (`queue` and `kind` not NULL), that pair's: see
-- closed_job_ids. The closure's ready row (its slot's, by the ring's key) is read only for a
-- pair: without one, a probe per closure walked read nothing of it.
(%(queue)s::text IS NULL
 OR EXISTS (SELECT 1 FROM awa.ready_entries r
             WHERE r.queue = d.queue AND r.priority = d.priority
               AND r.shard = d.shard AND r.lane_seq = d.lane_seq
               AND r.ready_slot = d.ready_slot
               AND r.queue = %(queue)s::text AND r.kind = %(kind)s::text))
AND (SELECT n.job_id FROM awa.ready_entries n
      WHERE n.job_id = d.job_id AND n.run_lease >= d.run_lease LIMIT 1)
    IS DISTINCT FROM d.job_id
AND (SELECT q.job_id FROM awa.dlq_entries q WHERE q.job_id = d.job_id)
    IS DISTINCT FROM d.job_id
AND (SELECT f.job_id FROM awa.deferred_jobs f WHERE f.job_id = d.job_id)
    IS DISTINCT FROM d.job_id
AND (SELECT p.job_id FROM awa.purged_jobs p WHERE p.job_id = d.job_id)
    IS DISTINCT FROM d.job_id

-- name: kept_closure_ids
-- The records of %(state)s kept past their ring slot in terminal_history (given a pair, that
-- pair's), each only when no newer fact follows it: an arm of closed_job_ids and
-- failed_job_ids.
(SELECT h.job_id FROM awa.terminal_history h
  WHERE h.job_id < %(before)s AND h.state = %(state)s
    AND (%(queue)s::text IS NULL OR (h.queue = %(queue)s::text AND h.kind = %(kind)s::text))
    AND (SELECT n.job_id FROM awa.ready_entries n
          WHERE n.job_id = h.job_id AND n.run_lease > h.run_lease LIMIT 1)
        IS DISTINCT FROM h.job_id
    AND (SELECT q.job_id FROM awa.dlq_entries q WHERE q.job_id = h.job_id)
        IS DISTINCT FROM h.job_id
    AND (SELECT f.job_id FROM awa.deferred_jobs f WHERE f.job_id = h.job_id)
        IS DISTINCT FROM h.job_id
  ORDER BY h.job_id DESC LIMIT %(size)s)

-- name: closed_job_ids
-- `completed`, `failed` or `cancelled` (%(state)s): closures in the ring with that outcome,
-- plus, for failed and cancelled, records kept past their slot in terminal_history and
-- cancelled ready rows (tombstones) — each only when no newer fact (a retry's ready row, a
-- backlog or DLQ row) follows it. A closure of a job purged from the DLQ (its marker in
-- awa.purged_jobs) is left out, as awa.jobs leaves the job out: else a state's count would
-- hold jobs its list hides (issue #36). Given a pair (`queue` and `kind` not NULL), only that
-- pair's jobs.
-- Each "no newer fact" check is a scalar probe, planned on its own as one index lookup by job
-- id per walked row, not an anti-join: behind the pair's filter and the anti-join with the DLQ
-- the planner expected one closure where tens of thousands came, and joined the purge markers
-- by a nested loop over a sequential scan of them, once per closure (issue #36: seconds on the
-- failed pages at a million jobs). The probe answers the newer fact's job id, compared with IS
-- DISTINCT FROM, which the planner expects to keep nearly every row, as the anti-joins' estimate
-- did; an IS NULL test it expects to keep almost none, and it then sorted a whole state's
-- closures rather than walk them to the page's LIMIT. Probes the planner costs alike run in
-- the order written: the DLQ's first, the newer fact a failed closure most often has.
WITH newest AS MATERIALIZED (
    -- A page of completed jobs walks the newest closures whatever their outcome, keeping the
    -- completed ones: walking the completed ones, each ring slot's scan reads up to its first,
    -- which in an older slot of failures and dead letters is all of it (issue #36: the 50,100
    -- closures of slot 0 at a million jobs). It stops after 10,000 closures; below them the
    -- walk of the completed ones (the next arm) goes on, from the last closure read. A count
    -- (10,001 ids) reads to its cap anyway, and so walks the completed ones from the start.
    SELECT d.job_id FROM (
        SELECT d.job_id, d.run_lease, d.outcome, d.queue, d.priority, d.shard, d.lane_seq,
               d.ready_slot
          FROM awa.done_entries d
         WHERE %(state)s::text = 'completed' AND %(size)s < 10000 AND d.job_id < %(before)s
         ORDER BY d.job_id DESC LIMIT 10000) d
     WHERE d.outcome = 'completed' AND {{closure_is_newest}}
     ORDER BY d.job_id DESC LIMIT %(size)s
), below AS MATERIALIZED (
    -- The last closure that walk read when it read to its cap without filling the page.
    SELECT d.job_id FROM awa.done_entries d
     WHERE %(state)s::text = 'completed' AND %(size)s < 10000 AND d.job_id < %(before)s
       AND (SELECT count(*) FROM newest) < %(size)s
     ORDER BY d.job_id DESC OFFSET 9999 LIMIT 1
)
SELECT job_id FROM (
    TABLE newest
    UNION
    (SELECT d.job_id FROM awa.done_entries d
      WHERE d.job_id < %(before)s AND d.outcome = %(state)s
        AND (%(state)s::text <> 'completed' OR %(size)s >= 10000
             OR d.job_id <= (SELECT b.job_id FROM below b))
        AND {{closure_is_newest}}
      ORDER BY d.job_id DESC LIMIT %(size)s)
    UNION
    {{kept_closure_ids}}
    UNION
    -- Tombstones have no job_id index; there is one per cancel of a job that had not started,
    -- a small set next to the ring's claims and closures.
    (SELECT t.job_id FROM awa.ready_tombstones t
       JOIN awa.ready_entries r
         ON r.queue = t.queue AND r.priority = t.priority AND r.shard = t.shard
        AND r.lane_seq = t.lane_seq AND r.ready_slot = t.ready_slot
      WHERE %(state)s::text = 'cancelled' AND t.job_id < %(before)s
        AND (%(queue)s::text IS NULL OR (r.queue = %(queue)s::text AND r.kind = %(kind)s::text))
        AND (SELECT n.job_id FROM awa.ready_entries n
              WHERE n.job_id = t.job_id AND n.run_lease > r.run_lease LIMIT 1)
            IS DISTINCT FROM t.job_id
        AND (SELECT q.job_id FROM awa.dlq_entries q WHERE q.job_id = t.job_id)
            IS DISTINCT FROM t.job_id
        AND (SELECT f.job_id FROM awa.deferred_jobs f WHERE f.job_id = t.job_id)
            IS DISTINCT FROM t.job_id
      ORDER BY t.job_id DESC LIMIT %(size)s)
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: failed_job_ids
-- closed_job_ids for a page of `failed` (not its count), planned by plan_as_merge. A failed
-- closure's newest fact is most often a DLQ entry, or that entry's purge marker: failures
-- moved to the DLQ in bulk leave tens of thousands of closures above a page's failed jobs,
-- and a probe of the DLQ and of the markers per closure read every one of them on the way
-- (issue #36: 50,050 probes at a million jobs). Here the closures, the DLQ and the markers
-- are walked down their job_id indexes together, from the cursor, and merge anti-joins drop
-- the closures of jobs in either, each index read once and only as far as the walk goes;
-- the other facts (and the DLQ and the marker once more: cheap, for the closures kept) are
-- probed by closure_is_newest after them. As a nested loop, the planner's choice for the
-- handful of closures it expects behind the anti-joins, one of them read the purge markers
-- whole once per closure; as a hash, the whole DLQ. Each anti-join is bounded by the cursor
-- on its own side, as the merge cannot infer it.
SELECT job_id FROM (
    (SELECT d.job_id FROM (
        SELECT d.job_id, d.run_lease, d.queue, d.priority, d.shard, d.lane_seq, d.ready_slot
          FROM awa.done_entries d
         WHERE d.job_id < %(before)s AND d.outcome = %(state)s
           AND NOT EXISTS (SELECT 1 FROM (SELECT q.job_id FROM awa.dlq_entries q
                                           WHERE q.job_id < %(before)s
                                           ORDER BY q.job_id DESC) q
                            WHERE q.job_id = d.job_id)
           AND NOT EXISTS (SELECT 1 FROM (SELECT p.job_id FROM awa.purged_jobs p
                                           WHERE p.job_id < %(before)s
                                           ORDER BY p.job_id DESC) p
                            WHERE p.job_id = d.job_id)
         ORDER BY d.job_id DESC OFFSET 0) d
      WHERE {{closure_is_newest}}
      ORDER BY d.job_id DESC LIMIT %(size)s)
    UNION
    {{kept_closure_ids}}
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: search_job_ids
-- The newest distinct ids below a keyset cursor of the jobs some row of which matches a content
-- search, read from the search indexes of migration 0024 (GIN jsonb_path_ops on arguments, GIN
-- on tags, pg_trgm on awa.error_text), so a match is found at any depth of the history. A NULL
-- parameter searches nothing; a non-NULL one folds its OR away (the parameters are bound as
-- literals), leaving the partial index's own predicate (args <> '{}', tags <> '{}', errors <>
-- '[]', error IS NOT NULL) beside the search, so the planner may use the index; it may instead
-- walk the job_id index and filter, when most rows match. The ids are candidates: a job's
-- current record (matching_jobs) decides, since an older fact of the job may be the one that
-- matched, and the rows of one arm need not hold every searched field. Together the arms cover
-- every place awa.jobs reads a job's arguments, tags and errors from: a ready row (its earlier
-- errors), a closure's error, a cancel's reason, the backlog, the kept history and the DLQ.
-- Given a pair (`queue` and `kind` not NULL), only that pair's rows. Given a state, only the arms
-- that can hold a job's newest fact in it: a scheduled, retryable or held job is its backlog
-- row, a dead letter its DLQ row, whatever older facts the ring holds of it.
SELECT job_id FROM (
    (SELECT DISTINCT r.job_id FROM awa.ready_entries r
      WHERE r.job_id < %(before)s
        AND (%(state)s::text IS NULL
             OR %(state)s::text NOT IN ('scheduled', 'retryable', 'held', 'dlq'))
        AND (%(queue)s::text IS NULL OR (r.queue = %(queue)s::text AND r.kind = %(kind)s::text))
        AND (%(args)s::jsonb IS NULL OR (r.args <> '{}'::jsonb AND r.args @> %(args)s::jsonb))
        AND (%(tag)s::text IS NULL OR (r.tags <> '{}' AND r.tags @> ARRAY[%(tag)s::text]))
        AND (%(error)s::text IS NULL
             OR (r.errors <> '[]'::jsonb AND awa.error_text(r.errors) ILIKE %(error)s::text))
      ORDER BY r.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT f.job_id FROM awa.deferred_jobs f
      WHERE f.job_id < %(before)s
        AND (%(state)s::text IS NULL OR f.state = %(state)s::text)
        AND (%(queue)s::text IS NULL OR (f.queue = %(queue)s::text AND f.kind = %(kind)s::text))
        AND (%(args)s::jsonb IS NULL OR (f.args <> '{}'::jsonb AND f.args @> %(args)s::jsonb))
        AND (%(tag)s::text IS NULL OR (f.tags <> '{}' AND f.tags @> ARRAY[%(tag)s::text]))
        AND (%(error)s::text IS NULL
             OR (f.errors <> '[]'::jsonb AND awa.error_text(f.errors) ILIKE %(error)s::text))
      ORDER BY f.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT h.job_id FROM awa.terminal_history h
      WHERE h.job_id < %(before)s
        AND (%(state)s::text IS NULL OR h.state = %(state)s::text)
        AND (%(queue)s::text IS NULL OR (h.queue = %(queue)s::text AND h.kind = %(kind)s::text))
        AND (%(args)s::jsonb IS NULL OR (h.args <> '{}'::jsonb AND h.args @> %(args)s::jsonb))
        AND (%(tag)s::text IS NULL OR (h.tags <> '{}' AND h.tags @> ARRAY[%(tag)s::text]))
        AND (%(error)s::text IS NULL
             OR (h.errors <> '[]'::jsonb AND awa.error_text(h.errors) ILIKE %(error)s::text))
      ORDER BY h.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT q.job_id FROM awa.dlq_entries q
      WHERE q.job_id < %(before)s
        AND (%(state)s::text IS NULL OR %(state)s::text = 'dlq')
        AND (%(queue)s::text IS NULL OR (q.queue = %(queue)s::text AND q.kind = %(kind)s::text))
        AND (%(args)s::jsonb IS NULL OR (q.args <> '{}'::jsonb AND q.args @> %(args)s::jsonb))
        AND (%(tag)s::text IS NULL OR (q.tags <> '{}' AND q.tags @> ARRAY[%(tag)s::text]))
        AND (%(error)s::text IS NULL
             OR (q.errors <> '[]'::jsonb AND awa.error_text(q.errors) ILIKE %(error)s::text))
      ORDER BY q.job_id DESC LIMIT %(size)s)
    UNION
    -- A closure's error and a cancel's reason hold no arguments or tags: these arms answer an
    -- error search alone, the job's record checks the rest.
    (SELECT d.job_id FROM awa.done_entries d
      WHERE %(error)s::text IS NOT NULL AND d.job_id < %(before)s
        AND (%(state)s::text IS NULL
             OR %(state)s::text NOT IN ('scheduled', 'retryable', 'held', 'dlq'))
        AND d.error IS NOT NULL AND awa.error_text(d.error) ILIKE %(error)s::text
        AND (%(queue)s::text IS NULL
             OR EXISTS (SELECT 1 FROM awa.ready_entries r
                         WHERE r.queue = d.queue AND r.priority = d.priority
                           AND r.shard = d.shard AND r.lane_seq = d.lane_seq
                           AND r.ready_slot = d.ready_slot
                           AND r.queue = %(queue)s::text AND r.kind = %(kind)s::text))
      ORDER BY d.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT t.job_id FROM awa.ready_tombstones t
      WHERE %(error)s::text IS NOT NULL AND t.job_id < %(before)s
        AND (%(state)s::text IS NULL OR %(state)s::text = 'cancelled')
        AND t.reason ILIKE %(error)s::text
        AND (%(queue)s::text IS NULL
             OR EXISTS (SELECT 1 FROM awa.ready_entries r
                         WHERE r.queue = t.queue AND r.priority = t.priority
                           AND r.shard = t.shard AND r.lane_seq = t.lane_seq
                           AND r.ready_slot = t.ready_slot
                           AND r.queue = %(queue)s::text AND r.kind = %(kind)s::text))
      ORDER BY t.job_id DESC LIMIT %(size)s)
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: matching_jobs
-- The current records of these candidate ids that match a content search, ordered by id: the
-- state (NULL: any), arguments containing %(args)s (jsonb @>), the tag %(tag)s, and an error
-- whose message, type or reason matches the ILIKE pattern %(error)s (tracebacks are not
-- searched). Only the given ids are read, so the cost is that of hydrating them.
SELECT job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at, result
  FROM awa.jobs j
 WHERE j.job_id = ANY (%(job_ids)s::bigint[])
   AND (%(state)s::text IS NULL OR j.state = %(state)s::text)
   AND (%(args)s::jsonb IS NULL OR j.args @> %(args)s::jsonb)
   AND (%(tag)s::text IS NULL OR %(tag)s::text = ANY (j.tags))
   AND (%(error)s::text IS NULL
        OR EXISTS (SELECT 1
                     FROM jsonb_array_elements(CASE WHEN jsonb_typeof(j.errors) = 'array'
                                                    THEN j.errors ELSE '[]' END) e
                    WHERE e ->> 'message' ILIKE %(error)s::text
                       OR e ->> 'type' ILIKE %(error)s::text
                       OR e ->> 'reason' ILIKE %(error)s::text))
 ORDER BY j.job_id

-- A kind or queue filter is read from the (queue, kind, job_id) index of each table instead
-- (migration 0008): name_pairs finds the (queue, kind) pairs whose lower-cased names match the
-- LIKE patterns, then storage/browse.py lists each pair with the *_by_name block of the state
-- (the pair's `queue` and `kind` given as values, so the planner reads its statistics of that
-- name, where an array of pairs would leave it guessing) and keeps the newest `size` ids of
-- all pairs. Each block walks the pair's ids backwards from the cursor and stops after `size`,
-- checking its state exactly as the unfiltered block above of the same name; where the state's
-- table holds no kind (claims, closures, tombstones) the walk goes through the pair's ready
-- rows, which is short for a rare pair; for a pair with many ready rows, the unfiltered
-- open_attempt_job_ids and closed_job_ids blocks, given the pair, walk the state's own rows
-- and keep the pair's.

-- name: name_pairs
-- The (queue, kind) pairs of the four tables holding a job's names, found by a loose index
-- scan: each step reads the first index entry past the previous pair, so a table costs one
-- probe per distinct pair (a deployment has tens), not a read of its rows.
WITH RECURSIVE
ready_pairs (queue, kind) AS (
    (SELECT r.queue, r.kind FROM awa.ready_entries r ORDER BY r.queue, r.kind LIMIT 1)
    UNION ALL
    SELECT n.queue, n.kind FROM ready_pairs p CROSS JOIN LATERAL (
        SELECT r.queue, r.kind FROM awa.ready_entries r
         WHERE (r.queue, r.kind) > (p.queue, p.kind) ORDER BY r.queue, r.kind LIMIT 1) n
),
deferred_pairs (queue, kind) AS (
    (SELECT f.queue, f.kind FROM awa.deferred_jobs f ORDER BY f.queue, f.kind LIMIT 1)
    UNION ALL
    SELECT n.queue, n.kind FROM deferred_pairs p CROSS JOIN LATERAL (
        SELECT f.queue, f.kind FROM awa.deferred_jobs f
         WHERE (f.queue, f.kind) > (p.queue, p.kind) ORDER BY f.queue, f.kind LIMIT 1) n
),
history_pairs (queue, kind) AS (
    (SELECT h.queue, h.kind FROM awa.terminal_history h ORDER BY h.queue, h.kind LIMIT 1)
    UNION ALL
    SELECT n.queue, n.kind FROM history_pairs p CROSS JOIN LATERAL (
        SELECT h.queue, h.kind FROM awa.terminal_history h
         WHERE (h.queue, h.kind) > (p.queue, p.kind) ORDER BY h.queue, h.kind LIMIT 1) n
),
dlq_pairs (queue, kind) AS (
    (SELECT q.queue, q.kind FROM awa.dlq_entries q ORDER BY q.queue, q.kind LIMIT 1)
    UNION ALL
    SELECT n.queue, n.kind FROM dlq_pairs p CROSS JOIN LATERAL (
        SELECT q.queue, q.kind FROM awa.dlq_entries q
         WHERE (q.queue, q.kind) > (p.queue, p.kind) ORDER BY q.queue, q.kind LIMIT 1) n
)
SELECT queue, kind FROM (
    TABLE ready_pairs UNION TABLE deferred_pairs UNION TABLE history_pairs UNION TABLE dlq_pairs
) pairs
 WHERE (%(kind)s::text IS NULL OR lower(kind) LIKE %(kind)s)
   AND (%(queue)s::text IS NULL OR lower(queue) LIKE %(queue)s)
 ORDER BY queue, kind

-- name: pair_ready_rows
-- How many ready rows one (queue, kind) pair has below the cursor, counting at most `cap`:
-- an index-only walk of the pair's name-index entries, to choose how to list a state that
-- only the ring's claims and closures hold (see storage/browse.py).
SELECT count(*) FROM (
    SELECT 1 FROM awa.ready_entries r
     WHERE r.queue = %(queue)s AND r.kind = %(kind)s AND r.job_id < %(before)s
     LIMIT %(cap)s
) rows

-- name: job_id_window_by_name
SELECT job_id FROM (
    (SELECT DISTINCT r.job_id FROM awa.ready_entries r
      WHERE r.queue = %(queue)s AND r.kind = %(kind)s AND r.job_id < %(before)s
      ORDER BY r.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT f.job_id FROM awa.deferred_jobs f
      WHERE f.queue = %(queue)s AND f.kind = %(kind)s AND f.job_id < %(before)s
      ORDER BY f.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT h.job_id FROM awa.terminal_history h
      WHERE h.queue = %(queue)s AND h.kind = %(kind)s AND h.job_id < %(before)s
      ORDER BY h.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT q.job_id FROM awa.dlq_entries q
      WHERE q.queue = %(queue)s AND q.kind = %(kind)s AND q.job_id < %(before)s
      ORDER BY q.job_id DESC LIMIT %(size)s)
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: available_job_ids_by_name
-- This block, open_attempt_job_ids_by_name and closed_job_ids_by_name walk the pair in
-- (queue, kind, job_id) order, which only the name index gives, and check each walked row's
-- state by scalar probes (`SELECT true ... LIMIT 1`, NULL when there is none) in the select
-- list of a subquery kept apart by OFFSET 0: there each probe is one index lookup by job id,
-- run only for the rows the walk reaches before its LIMIT. As a join, or as EXISTS (which the
-- planner may turn into a hash of the whole table), it would read every claim or closure.
SELECT a.job_id FROM (
    SELECT r.job_id, {{ready_row_probes}}
      FROM awa.ready_entries r
     WHERE r.queue = %(queue)s AND r.kind = %(kind)s AND r.job_id < %(before)s
     ORDER BY r.job_id DESC OFFSET 0) a
 WHERE a.claimed IS NULL AND a.tombstoned IS NULL
 ORDER BY a.job_id DESC LIMIT %(size)s

-- name: available_job_ids_by_name_bounded
-- available_job_ids_by_name for a pair with many ready rows (see storage/browse.py). Like
-- available_job_ids, the walk stops after the pair's newest 10,000 ready rows, and when those
-- do not fill the page the rest comes from what waits below them: the queue's rows after its
-- lanes' claim cursors (awa.waiting_entries), kept by kind (issue #36: the last page of a
-- filtered bulk walk read every claimed row of the pair). The walk's bounds are row
-- comparisons on (queue, kind, job_id), never an equality on the names, and it is ordered by
-- all three: only the name index gives that order, so the planner cannot walk a partition's
-- job_id index instead, filtering out every other pair's rows on the way (with the names as
-- constants it did, for the partition whose statistics made it look cheaper). Its other plan,
-- a sort of all of the pair's rows (each probed), is ruled out by plan_as_name_walk.
WITH found AS MATERIALIZED (
    SELECT w.job_id FROM (
        SELECT r.job_id, r.queue, r.kind, {{ready_row_probes}}
          FROM awa.ready_entries r
         WHERE (r.queue, r.kind, r.job_id) < (%(queue)s::text, %(kind)s::text, %(before)s::bigint)
           AND (r.queue, r.kind) >= (%(queue)s::text, %(kind)s::text)
         ORDER BY r.queue DESC, r.kind DESC, r.job_id DESC LIMIT 10000) w
     WHERE w.claimed IS NULL AND w.tombstoned IS NULL
     -- The walk's order (the pair's job ids, newest first), so the probes stop at the page.
     ORDER BY w.queue DESC, w.kind DESC, w.job_id DESC LIMIT %(size)s
), bottom AS MATERIALIZED (
    -- The walk's last row when it read to the cap (else none: it read every row of the pair
    -- below the cursor), read only when the walk did not fill the page.
    SELECT r.job_id FROM awa.ready_entries r
     WHERE (r.queue, r.kind, r.job_id) < (%(queue)s::text, %(kind)s::text, %(before)s::bigint)
       AND (r.queue, r.kind) >= (%(queue)s::text, %(kind)s::text)
       AND (SELECT count(*) FROM found) < %(size)s
     ORDER BY r.queue DESC, r.kind DESC, r.job_id DESC OFFSET 9999 LIMIT 1
)
SELECT f.job_id FROM found f
UNION
(SELECT w.job_id FROM bottom b
  CROSS JOIN LATERAL (SELECT w.job_id FROM awa.waiting_entries(%(queue)s::text) w
                       WHERE w.kind = %(kind)s::text AND w.job_id <= b.job_id
                       ORDER BY w.job_id DESC LIMIT %(size)s) w)
 ORDER BY 1 DESC LIMIT %(size)s

-- name: open_attempt_job_ids_by_name
SELECT DISTINCT a.job_id FROM (
    SELECT r.job_id,
           (SELECT true FROM awa.claim_receipts c
             WHERE c.job_id = r.job_id AND c.queue = r.queue
               AND c.priority = r.priority AND c.shard = r.shard
               AND c.lane_seq = r.lane_seq AND c.ready_slot = r.ready_slot
               AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                                  AND d.ready_slot = c.ready_slot)
               AND %(waiting)s = EXISTS (
                       SELECT 1 FROM awa.leases x
                        WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
                          AND x.callback_id IS NOT NULL AND x.callback_resumed_at IS NULL)
             LIMIT 1) AS open
      FROM awa.ready_entries r
     WHERE r.queue = %(queue)s AND r.kind = %(kind)s AND r.job_id < %(before)s
     ORDER BY r.job_id DESC OFFSET 0) a
 WHERE a.open
 ORDER BY a.job_id DESC LIMIT %(size)s

-- name: deferred_job_ids_by_name
SELECT f.job_id FROM awa.deferred_jobs f
 WHERE f.queue = %(queue)s AND f.kind = %(kind)s AND f.job_id < %(before)s
   AND f.state = %(state)s
 ORDER BY f.job_id DESC LIMIT %(size)s

-- name: dlq_job_ids_by_name
SELECT q.job_id FROM awa.dlq_entries q
 WHERE q.queue = %(queue)s AND q.kind = %(kind)s AND q.job_id < %(before)s
 ORDER BY q.job_id DESC LIMIT %(size)s

-- name: closed_job_ids_by_name
SELECT job_id FROM (
    (SELECT a.job_id FROM (
        SELECT r.job_id,
               (SELECT true FROM awa.done_entries d
                 WHERE d.job_id = r.job_id AND d.queue = r.queue
                   AND d.priority = r.priority AND d.shard = r.shard
                   AND d.lane_seq = r.lane_seq AND d.ready_slot = r.ready_slot
                   AND d.outcome = %(state)s
                   AND NOT EXISTS (SELECT 1 FROM awa.ready_entries n
                                    WHERE n.job_id = d.job_id AND n.run_lease >= d.run_lease)
                   AND NOT EXISTS (SELECT 1 FROM awa.deferred_jobs f WHERE f.job_id = d.job_id)
                   AND NOT EXISTS (SELECT 1 FROM awa.dlq_entries q WHERE q.job_id = d.job_id)
                   AND NOT EXISTS (SELECT 1 FROM awa.purged_jobs p WHERE p.job_id = d.job_id)
                 LIMIT 1) AS closed
          FROM awa.ready_entries r
         WHERE r.queue = %(queue)s AND r.kind = %(kind)s AND r.job_id < %(before)s
         ORDER BY r.job_id DESC OFFSET 0) a
      WHERE a.closed
      ORDER BY a.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT a.job_id FROM (
        SELECT h.job_id,
               NOT EXISTS (SELECT 1 FROM awa.ready_entries n
                            WHERE n.job_id = h.job_id AND n.run_lease > h.run_lease)
               AND NOT EXISTS (SELECT 1 FROM awa.deferred_jobs f WHERE f.job_id = h.job_id)
               AND NOT EXISTS (SELECT 1 FROM awa.dlq_entries q WHERE q.job_id = h.job_id)
               AS newest
          FROM awa.terminal_history h
         WHERE h.queue = %(queue)s AND h.kind = %(kind)s AND h.job_id < %(before)s
           AND h.state = %(state)s
         ORDER BY h.job_id DESC OFFSET 0) a
      WHERE a.newest
      ORDER BY a.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT a.job_id FROM (
        SELECT r.job_id,
               (SELECT true FROM awa.ready_tombstones t
                 WHERE t.queue = r.queue AND t.priority = r.priority
                   AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                   AND t.ready_slot = r.ready_slot
                   AND NOT EXISTS (SELECT 1 FROM awa.ready_entries n
                                    WHERE n.job_id = r.job_id AND n.run_lease > r.run_lease)
                   AND NOT EXISTS (SELECT 1 FROM awa.deferred_jobs f WHERE f.job_id = r.job_id)
                   AND NOT EXISTS (SELECT 1 FROM awa.dlq_entries q WHERE q.job_id = r.job_id)
                 LIMIT 1) AS cancelled
          FROM awa.ready_entries r
         WHERE %(state)s::text = 'cancelled'
           AND r.queue = %(queue)s AND r.kind = %(kind)s AND r.job_id < %(before)s
         ORDER BY r.job_id DESC OFFSET 0) a
      WHERE a.cancelled
      ORDER BY a.job_id DESC LIMIT %(size)s)
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: error_types
-- Error types that exist, for an operator's suggestions: the last error's type of the newest
-- %(scan)s entries of the DLQ, of the newest %(scan)s failed or cancelled closures (the partial
-- index of migration 0021) and of the newest %(scan)s records kept past their slot, distinct,
-- in name order, at most %(limit)s. Each arm is a bounded walk of an index, at any history size.
SELECT DISTINCT error_type FROM (
    (SELECT q.errors -> -1 ->> 'type' AS error_type FROM awa.dlq_entries q
      ORDER BY q.dlq_at DESC, q.job_id DESC LIMIT %(scan)s)
    UNION ALL
    (SELECT d.error ->> 'type' FROM awa.done_entries d
      WHERE d.outcome IN ('failed', 'cancelled')
      ORDER BY d.job_id DESC LIMIT %(scan)s)
    UNION ALL
    (SELECT h.errors -> -1 ->> 'type' FROM awa.terminal_history h
      ORDER BY h.job_id DESC LIMIT %(scan)s)
) types
 WHERE error_type IS NOT NULL AND error_type <> ''
 ORDER BY error_type LIMIT %(limit)s
