-- Read surface over every plane: the awa.jobs view.

-- name: get_jobs
-- Current state of the given jobs.
SELECT job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at
  FROM awa.jobs WHERE job_id = ANY (%(job_ids)s::bigint[])
