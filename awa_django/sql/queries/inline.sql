-- In-process runs (awa_django.testing, eager mode): reads and clock moves on Django's connection.
-- Claims, promotions and closures reuse the worker's blocks (queue, backlog, execution).

-- name: next_ready
-- The job a claim of one queue would take next: the head of its most urgent lane that has an
-- unclaimed, untombstoned ready row (the order awa.claim_ready walks).
SELECT r.job_id, r.kind
  FROM awa.ready_entries r
 WHERE r.queue = %(queue)s
   AND r.lane_seq > coalesce((SELECT max(c.lane_seq) FROM awa.claim_receipts c
                               WHERE c.queue = r.queue AND c.priority = r.priority
                                 AND c.shard = r.shard), 0)
   AND NOT EXISTS (
           SELECT 1 FROM awa.ready_tombstones t
            WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
              AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
 ORDER BY r.priority, r.shard, r.lane_seq
 LIMIT 1

-- name: shift_deferred
-- Test clock: moves every scheduled and retryable job's run_at earlier by `seconds`, plus the
-- age of the current transaction, since promotion compares run_at with now(), the transaction's
-- start, which an open test transaction holds back. Returns how many jobs moved.
WITH moved AS (
    UPDATE awa.deferred_jobs
       SET run_at = run_at - make_interval(secs => %(seconds)s::double precision)
                   - (clock_timestamp() - now())
     RETURNING 1
)
SELECT count(*) FROM moved

-- name: make_due
-- Test clock and eager retries: the given deferred jobs (every one when NULL) are due now.
WITH moved AS (
    UPDATE awa.deferred_jobs SET run_at = now()
     WHERE (%(job_ids)s::bigint[] IS NULL OR job_id = ANY (%(job_ids)s::bigint[]))
       AND run_at > now()
     RETURNING 1
)
SELECT count(*) FROM moved
