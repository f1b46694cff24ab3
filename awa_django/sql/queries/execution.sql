-- Execution plane: closing attempts.

-- name: close_attempts
-- Closes a batch of attempts in one statement, guarded by (job_id, run_lease); returns the
-- attempts that were closed, so the caller can report the rest as stale.
SELECT job_id, run_lease
  FROM awa.close_attempts(%(ready_slot)s::integer[], %(queue)s::text[],
                          %(priority)s::smallint[], %(shard)s::smallint[],
                          %(lane_seq)s::bigint[], %(job_id)s::bigint[], %(run_lease)s::bigint[],
                          %(outcome)s::text[], %(run_at)s::timestamptz[], %(error)s::jsonb[])
