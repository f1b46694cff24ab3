-- Queue plane: lanes, the ready ring and claims.

-- name: enqueue_job
-- Enqueues one job in the caller's transaction (ready ring, or deferred when run_at is in the
-- future) and returns its id; awa.enqueue_job holds the lane lock until the caller commits.
SELECT awa.enqueue_job(%(kind)s, %(queue)s, %(priority)s::smallint, %(args)s::jsonb,
                       %(max_attempts)s::integer, %(run_at)s::timestamptz, %(metadata)s::jsonb,
                       %(tags)s::text[]) AS job_id

-- name: reserve_ready_batch
-- Reserves job ids and lane positions for a COPY of n immediate jobs on one lane; the lane lock
-- is held until the caller's transaction ends.
SELECT lane.ready_slot, lane.ready_generation, lane.lane_seqs,
       ARRAY(SELECT nextval('awa.job_id_seq') FROM generate_series(1, %(count)s)) AS job_ids
  FROM awa.reserve_lane(%(queue)s, %(priority)s::smallint, 0::smallint, %(count)s, true) AS lane

-- name: copy_ready
-- COPY target for a reserved batch of immediate jobs.
COPY awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation, job_id,
                        kind, args, attempt, run_lease, max_attempts, run_at, created_at,
                        metadata, tags, errors) FROM STDIN

-- name: notify_queue
-- Wakes the workers of a queue when the caller's transaction commits.
SELECT pg_notify('awa', %(queue)s)

-- name: claim_ready
-- Claims up to `limit` jobs of one queue, appending receipts (see awa.claim_ready for locking).
SELECT queue, priority, shard, lane_seq, ready_slot, job_id, kind, args, attempt, run_lease,
       max_attempts, run_at, created_at, metadata, tags, errors, progress, checkpoint
  FROM awa.claim_ready(%(queue)s, %(limit)s::integer, %(claimed_by)s,
                       %(deadline_s)s::double precision)

-- name: cancel_job
-- Cancels one job whatever its state; returns what happened (see awa.cancel_job).
SELECT awa.cancel_job(%(job_id)s::bigint, %(reason)s) AS outcome
