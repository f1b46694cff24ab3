-- Callbacks: external waits of an attempt (docs/callbacks.md).

-- name: register_callback
-- Registers a callback on an open attempt; returns its timeout, NULL when the attempt is closed.
SELECT awa.register_callback(%(job_id)s, %(run_lease)s, %(callback_id)s,
                             %(timeout_s)s::double precision, %(claimed_by)s)

-- name: park_callback
-- Marks a registered callback parked (its handler gave the slot back); returns its status.
SELECT awa.park_callback(%(job_id)s, %(run_lease)s, %(callback_id)s)

-- name: take_callback_payload
-- The waiting handler's poll: takes a resumed payload (clearing the callback) or reports status.
SELECT status, payload
  FROM awa.take_callback_payload(%(job_id)s, %(run_lease)s, %(callback_id)s)

-- name: lock_callback
-- Locks a callback for an external resolution; returns its status and, when waiting, the attempt.
SELECT status, (job).queue, (job).priority, (job).shard, (job).lane_seq, (job).ready_slot,
       (job).job_id, (job).kind, (job).args, (job).attempt, (job).run_lease,
       (job).max_attempts, (job).run_at, (job).created_at, (job).metadata, (job).tags,
       (job).errors, (job).progress, (job).checkpoint, NULL::timestamptz AS claimed_at
  FROM awa.lock_callback(%(job_id)s, %(run_lease)s, %(callback_id)s)

-- name: resume_callback
-- Stores a resume payload for a sequential (not parked) wait, gives the attempt a fresh deadline
-- as long as its queue's, and wakes the owning worker at commit; returns the attempt if it did.
WITH resumed AS (
    UPDATE awa.leases x
       SET callback_resumed_at = now(), callback_payload = %(payload)s::jsonb,
           deadline_at = now() + (SELECT c.deadline_at - c.claimed_at FROM awa.claim_receipts c
                                   WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease)
     WHERE x.job_id = %(job_id)s AND x.run_lease = %(run_lease)s
       AND x.callback_id = %(callback_id)s AND x.callback_parked_at IS NULL
    RETURNING x.job_id, x.run_lease
)
SELECT pg_notify('awa_callback', job_id || ':' || run_lease) FROM resumed

-- name: extend_callback
-- Moves a waiting callback's timeout to now + timeout_s; returns the new timeout.
UPDATE awa.leases x
   SET callback_timeout_at = now() + make_interval(secs => %(timeout_s)s::double precision)
 WHERE x.job_id = %(job_id)s AND x.run_lease = %(run_lease)s AND x.callback_id = %(callback_id)s
RETURNING x.callback_timeout_at

-- name: lock_timed_out_callbacks
-- The rescuer's lock on leases of expired callbacks it is about to close (same order as an
-- external resolution: lease, then closure); skips the ones a resolution holds right now.
SELECT x.job_id, x.run_lease FROM awa.leases x
  JOIN unnest(%(job_id)s::bigint[], %(run_lease)s::bigint[]) AS a(job_id, run_lease)
    ON a.job_id = x.job_id AND a.run_lease = x.run_lease
 WHERE x.callback_id IS NOT NULL
   FOR UPDATE OF x SKIP LOCKED
