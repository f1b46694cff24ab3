-- Execution plane: closing attempts.

-- name: close_attempts
-- Closes a batch of attempts in one statement, guarded by (job_id, run_lease); returns the
-- attempts that were closed, so the caller can report the rest as stale, each with when its job
-- runs again (retried or snoozed), on the database's clock.
SELECT job_id, run_lease, run_at FROM awa.close_batch(%(batch)s::json)

-- name: close_workflow_attempts
-- close_attempts for a batch holding workflow steps: each row also carries the workflows the
-- statement finished (awa.workflow_finish), read once close_batch has run (a plpgsql set
-- returning function runs to its end before its first row is read).
SELECT job_id, run_lease, run_at, current_setting('awa.workflows_finished', true)
  FROM awa.close_batch(%(batch)s::json)

-- name: heartbeat_attempts
-- Heartbeats one worker's live attempts and saves their progress in one statement; returns the
-- attempts still open.
SELECT job_id, run_lease
  FROM awa.heartbeat_attempts(%(ready_slot)s::integer[], %(queue)s::text[],
                              %(priority)s::smallint[], %(shard)s::smallint[],
                              %(lane_seq)s::bigint[], %(job_id)s::bigint[],
                              %(run_lease)s::bigint[], %(progress)s::jsonb[],
                              %(checkpoint)s::jsonb[], %(claimed_by)s)

-- name: rescue_cutoffs
-- The upper bounds of this transaction's rescue scan: the next pass's cursor.
SELECT now() - make_interval(secs => %(staleness_s)s::double precision) AS claimed_before

-- name: mark_rescued
-- Records a complete rescue pass's cursor (migration 0029): every lease-less receipt claimed
-- before it is closed. Never moves back: an older cursor (a new leader's) is as true but says
-- less.
INSERT INTO awa.rescue_marks AS m (claimed_before) VALUES (%(claimed_before)s)
ON CONFLICT (singleton) DO UPDATE
   SET claimed_before = greatest(m.claimed_before, excluded.claimed_before), marked_at = now()

-- name: find_rescuable
-- Open attempts silent beyond the staleness window or past their callback timeout (read-only).
SELECT reason, (job).queue, (job).priority, (job).shard, (job).lane_seq, (job).ready_slot,
       (job).job_id, (job).kind, (job).args, (job).attempt, (job).run_lease,
       (job).max_attempts, (job).run_at, (job).created_at, (job).metadata, (job).tags,
       (job).errors, (job).progress, (job).checkpoint, NULL::timestamptz AS claimed_at
  FROM awa.find_rescuable(%(staleness_s)s::double precision, %(limit)s::integer,
                          %(claimed_after)s::timestamptz)

-- name: notify_cancel
-- Tells the workers that an attempt was closed under them, so its owner raises the cancel flag.
SELECT pg_notify('awa_cancel', attempt) FROM unnest(%(attempts)s::text[]) AS attempt
