-- Fleet-wide rate limits: claims paced by a token bucket kept in awa.rate_ledger.

-- name: claim_ready_limited
-- Claims within the queue's fleet-wide budget (see awa.claim_ready_limited); a row with a NULL
-- job_id carries throttled_for_s instead of a job. now() is the claim's transaction time, which
-- its receipts record.
SELECT (c.job).queue, (c.job).priority, (c.job).shard, (c.job).lane_seq, (c.job).ready_slot,
       (c.job).job_id, (c.job).kind, (c.job).args, (c.job).attempt, (c.job).run_lease,
       (c.job).max_attempts, (c.job).run_at, (c.job).created_at, (c.job).metadata,
       (c.job).tags, (c.job).errors, (c.job).progress, (c.job).checkpoint, now() AS claimed_at,
       c.throttled_for_s
  FROM awa.claim_ready_limited(%(queue)s, %(limit)s::integer, %(claimed_by)s,
                               %(deadline_s)s::double precision, %(aging_s)s::double precision,
                               %(sequential)s::boolean, %(rate)s::double precision,
                               %(burst)s::integer) c

-- name: delete_superseded_rate_entries
-- Deletes one bounded batch of ledger rows that are no longer their queue's newest (only the
-- newest is ever read); one row per row deleted.
WITH superseded AS (
    SELECT l.queue, l.entry FROM awa.rate_ledger l
     WHERE EXISTS (SELECT 1 FROM awa.rate_ledger n WHERE n.queue = l.queue AND n.entry > l.entry)
     ORDER BY l.entry LIMIT %(limit)s::integer
)
DELETE FROM awa.rate_ledger l USING superseded s WHERE l.queue = s.queue AND l.entry = s.entry
RETURNING 1
