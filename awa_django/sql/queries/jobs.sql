-- Reading jobs back over every plane: the awa.jobs view and the claim receipts.

-- name: get_jobs
-- Current state of the given jobs.
SELECT job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at, result
  FROM awa.jobs WHERE job_id = ANY (%(job_ids)s::bigint[])

-- name: get_claims
-- Every claim of the given jobs (one per attempt that started, snoozes included), oldest first.
SELECT job_id, claimed_by, claimed_at
  FROM awa.claim_receipts WHERE job_id = ANY (%(job_ids)s::bigint[])
 ORDER BY job_id, run_lease

-- name: list_jobs
-- One page of jobs for operators, newest id first, below before_id, filtered (NULL matches
-- everything). Diagnostic reads, not the hot path.
SELECT job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at, result
  FROM awa.jobs
 WHERE (%(queue)s::text IS NULL OR queue = %(queue)s::text)
   AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
   AND (%(state)s::text IS NULL OR state = %(state)s::text)
   AND (%(before_id)s::bigint IS NULL OR job_id < %(before_id)s::bigint)
 ORDER BY job_id DESC
 LIMIT %(limit)s::integer
