-- Backlog plane: scheduled and retryable jobs outside the claim path.

-- name: reserve_job_ids
-- Draws n job ids for a COPY into the deferred backlog.
SELECT ARRAY(SELECT nextval('awa.job_id_seq') FROM generate_series(1, %(count)s)) AS job_ids

-- name: copy_deferred
-- COPY target for a batch of scheduled jobs.
COPY awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt, run_lease,
                        max_attempts, run_at, created_at, metadata, tags, errors) FROM STDIN

-- name: promote_due_scheduled
-- Moves due scheduled jobs into the ready ring (literal state: see awa.promote_due).
SELECT awa.promote_due('scheduled', %(limit)s::integer) AS moved

-- name: promote_due_retryable
-- Moves due retryable jobs into the ready ring.
SELECT awa.promote_due('retryable', %(limit)s::integer) AS moved

-- name: seconds_until_next_due
-- Seconds until the earliest deferred job of the given unpaused queues is due (NULL when none;
-- <= 0 when already due). Paused queues are left out because promotion skips them too. Each
-- state is read through its own partial index.
WITH live AS (
    SELECT q FROM unnest(%(queues)s::text[]) AS q
     WHERE NOT EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = q AND m.paused)
)
SELECT extract(epoch FROM least(
           (SELECT min(run_at) FROM awa.deferred_jobs
             WHERE state = 'scheduled' AND queue IN (SELECT q FROM live)),
           (SELECT min(run_at) FROM awa.deferred_jobs
             WHERE state = 'retryable' AND queue IN (SELECT q FROM live)))
       - now())::float8 AS seconds

-- name: run_now
-- Moves the given scheduled and retryable jobs into the ready ring now (awa.run_now); returns
-- the ids moved.
SELECT job_id FROM awa.run_now(%(job_ids)s::bigint[]) AS job_id

-- name: kinds_nobody_runs
-- Per queue and kind, the jobs that wait for a worker that knows their kind: retryable, with an
-- UnknownJobKind error as their last entry (awa_django.core.unknown_kinds). Read through the
-- partial index deferred_jobs_unknown_kind, whose predicate is repeated here literally.
SELECT queue, kind, count(*)::integer AS jobs
  FROM awa.deferred_jobs
 WHERE state = 'retryable' AND errors -> -1 ->> 'type' = 'awa_django.exceptions.UnknownJobKind'
 GROUP BY queue, kind
 ORDER BY queue, kind
