-- In-process runs (eager mode, awa_django.testing): reads and clock moves on Django's connection.
-- Claims, promotions and closures are the worker's statements (queue, backlog, execution).

-- name: publish_pending
-- Publishes the ready rows this transaction has written so far, as its commit would: fires the
-- pending publication triggers now, then defers the later ones to the commit again. In-process
-- runs claim inside the caller's open (test) transaction, which has not committed.
SET CONSTRAINTS awa.ready_entries_publish IMMEDIATE;
SET CONSTRAINTS awa.ready_entries_publish DEFERRED

-- name: next_ready
-- The job a claim of one queue would take next: the head of its most urgent lane that has an
-- unclaimed, untombstoned ready row (the order awa.claim_ready walks).
SELECT h.job_id, h.kind
  FROM awa.queue_lanes l
 CROSS JOIN LATERAL awa.lane_head(l.queue, l.priority, l.shard) h
 WHERE l.queue = %(queue)s
 ORDER BY l.priority, l.shard
 LIMIT 1

-- name: shift_deferred
-- Test clock: moves every scheduled and retryable job's run_at earlier by `seconds`, plus the
-- age of the current transaction, since promotion compares run_at with now(), the transaction's
-- start, which an open test transaction holds back. Returns how many jobs moved.
WITH moved AS (
    UPDATE awa.deferred_jobs
       SET run_at = run_at - make_interval(secs => %(seconds)s::double precision)
                   - (clock_timestamp() - now())
     -- Not a held workflow step: it waits for its dependencies, not for a time.
     WHERE state IN ('scheduled', 'retryable')
     RETURNING 1
)
SELECT count(*) FROM moved

-- name: make_due
-- Test clock and eager retries: the given deferred jobs (every one when NULL) are due now.
WITH moved AS (
    UPDATE awa.deferred_jobs SET run_at = now()
     WHERE (%(job_ids)s::bigint[] IS NULL OR job_id = ANY (%(job_ids)s::bigint[]))
       AND run_at > now() AND state IN ('scheduled', 'retryable')
     RETURNING 1
)
SELECT count(*) FROM moved
