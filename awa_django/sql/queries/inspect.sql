-- Operator inspection of jobs through the awa.jobs view (diagnostic reads, not the hot path).

-- name: list_jobs
-- One page of jobs, newest id first, below before_id, filtered (NULL matches everything).
SELECT job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at, result
  FROM awa.jobs
 WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
   AND (%(state)s::text IS NULL OR state = %(state)s::text)
   AND (%(before_id)s::bigint IS NULL OR job_id < %(before_id)s::bigint)
 ORDER BY job_id DESC
 LIMIT %(limit)s::integer
