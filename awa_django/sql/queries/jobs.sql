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

