-- Queue plane: lanes, the ready ring and claims.

-- name: enqueue_job
-- Enqueues one job in the caller's transaction (ready ring, or deferred when run_at is in the
-- future) and returns its id; the transaction publishes it to its lane when it commits.
SELECT awa.enqueue_job(%(kind)s, %(queue)s, %(priority)s::smallint, %(args)s::jsonb,
                       %(max_attempts)s::integer, %(run_at)s::timestamptz, %(metadata)s::jsonb,
                       %(tags)s::text[]) AS job_id

-- name: enqueue_job_alone
-- As enqueue_job, for a statement that is its whole transaction (autocommit): the job is
-- published in the statement, so the commit runs no trigger (see awa.enqueue_job_alone).
SELECT awa.enqueue_job_alone(%(kind)s, %(queue)s, %(priority)s::smallint, %(args)s::jsonb,
                             %(max_attempts)s::integer, %(run_at)s::timestamptz,
                             %(metadata)s::jsonb, %(tags)s::text[]) AS job_id

-- name: reserve_ready_batch
-- Job ids, lane_seqs and the ring slot for a COPY of n immediate jobs on one lane (one shard,
-- chosen by the batch's ordering key or at random). Nothing is locked: the transaction
-- publishes the batch when it commits, and the lane goes on its list of lanes to publish
-- (awa.list_lane), so that the commit publishes it in the statement that publishes the lanes
-- of the transaction's other enqueues.
SELECT slot.slot, slot.generation,
       ARRAY(SELECT nextval('awa.lane_seq') FROM generate_series(1, %(count)s)) AS lane_seqs,
       ARRAY(SELECT nextval('awa.job_id_seq') FROM generate_series(1, %(count)s)) AS job_ids,
       lane.shard
  FROM awa.producer_slot() AS slot,
       awa.enqueue_shard(%(queue)s, %(ordering_key)s) AS lane(shard),
       awa.list_lane(%(queue)s, %(priority)s::smallint, lane.shard) AS listed

-- name: copy_ready
-- COPY target for a reserved batch of immediate jobs; the first row announces the batch.
COPY awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation, job_id,
                        kind, args, attempt, run_lease, max_attempts, run_at, created_at,
                        metadata, tags, errors, announce) FROM STDIN

-- name: notify_queues
-- Wakes the workers of several queues at once (on an autocommit connection: delivered now).
SELECT pg_notify('awa', q) FROM unnest(%(queues)s::text[]) AS q

-- name: claim_ready
-- Claims up to `limit` jobs of one queue, appending receipts (see awa.claim_ready for locking
-- and priority aging). now() is the claim's transaction time, which its receipts record.
SELECT queue, priority, shard, lane_seq, ready_slot, job_id, kind, args, attempt, run_lease,
       max_attempts, run_at, created_at, metadata, tags, errors, progress, checkpoint,
       now() AS claimed_at
  FROM awa.claim_ready(%(queue)s, %(limit)s::integer, %(claimed_by)s,
                       %(deadline_s)s::double precision, %(aging_s)s::double precision,
                       %(sequential)s::boolean)

-- name: claim_ready_in_turn
-- As claim_ready, after waiting (at most lock_timeout_ms) for the claim lock of one lane (issue
-- #37): the lane given, or else the first of the queue's lanes whose lock another session holds
-- right now (none: the claim runs at once). awa.claim_ready only tries a lane's
-- lock and moves on, so in a fleet every claimer but the lock's holder came back empty from a
-- queue full of work and slept until a notification or the poll interval; waiting instead
-- queues the claimers up, each woken by the commit of the one before it, at no cost to the
-- server while it waits (PostgreSQL grants the lock in order, and a plain claim's try fails
-- while others wait). The lock is this statement's transaction's, and advisory locks stack, so
-- awa.claim_ready's own try of it succeeds. The timeout is local to the transaction; the
-- claim's limit is read through the wait, so the wait comes first.
WITH held AS MATERIALIZED (
    -- Read only when no lane is given: pg_locks reads the whole lock table.
    SELECT k.objid FROM pg_locks k
     WHERE %(priority)s::smallint IS NULL AND k.locktype = 'advisory'
       AND k.classid = 1096237379 AND k.objsubid = 2 AND k.granted
       AND k.pid <> pg_backend_pid()
), lane AS MATERIALIZED (
    SELECT %(priority)s::smallint AS priority, %(shard)s::smallint AS shard
     WHERE %(priority)s::smallint IS NOT NULL
    UNION ALL
    (SELECT l.priority, l.shard FROM awa.queue_lanes l
      WHERE %(priority)s::smallint IS NULL AND l.queue = %(queue)s
        -- The key as pg_locks shows it: the integer's bits as an oid.
        AND (awa.lane_lock_key(l.queue, l.priority, l.shard)::bigint & 4294967295)::oid
            IN (SELECT h.objid FROM held h)
      ORDER BY l.priority, l.shard LIMIT 1)
), turn AS MATERIALIZED (
    SELECT set_config('lock_timeout', %(lock_timeout_ms)s, true) AS timeout,
           pg_advisory_xact_lock(1096237379, awa.lane_lock_key(%(queue)s, n.priority, n.shard))
               AS locked
      FROM lane n
)
SELECT queue, priority, shard, lane_seq, ready_slot, job_id, kind, args, attempt, run_lease,
       max_attempts, run_at, created_at, metadata, tags, errors, progress, checkpoint,
       now() AS claimed_at
  FROM awa.claim_ready(%(queue)s, (SELECT %(limit)s::integer FROM (SELECT count(*) FROM turn) w),
                       %(claimed_by)s, %(deadline_s)s::double precision,
                       %(aging_s)s::double precision, %(sequential)s::boolean)

-- name: cancel_jobs
-- Cancels each job whatever its state, in the order given, in the caller's transaction; a row
-- per job with what happened to it (see awa.cancel_job).
SELECT u.job_id, awa.cancel_job(u.job_id, %(reason)s) AS outcome
  FROM unnest(%(job_ids)s::bigint[]) AS u(job_id)

-- name: queue_depths
-- Per queue: waiting ready rows (awa.waiting_entries: after each lane's claim cursor, no
-- tombstone; the claimed rows the ring retains are not read) and the age of the oldest one's
-- run_at, scheduled and retryable backlog (literal states, as the partial indexes are built),
-- open attempts (a receipt without its closure, awa.open_attempts) split into running and
-- waiting_external (its lease has a callback_id), and DLQ entries. Every queue with a lane, a
-- deferred job or a DLQ entry gets a row, so a drained queue reports zeros instead of
-- vanishing.
WITH waiting AS (
    SELECT w.queue, count(*) AS available, min(w.run_at) AS oldest_run_at
      FROM awa.waiting_entries(NULL) w
     GROUP BY w.queue
), scheduled AS (
    SELECT queue, count(*) AS scheduled FROM awa.deferred_jobs
     WHERE state = 'scheduled' GROUP BY queue
), retryable AS (
    SELECT queue, count(*) AS retryable FROM awa.deferred_jobs
     WHERE state = 'retryable' GROUP BY queue
), running AS (
    SELECT c.queue,
           count(*) FILTER (WHERE NOT w.waiting) AS running,
           count(*) FILTER (WHERE w.waiting) AS waiting_external
      FROM awa.open_attempts() c
     CROSS JOIN LATERAL (
               SELECT EXISTS (SELECT 1 FROM awa.leases x
                               WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
                                 AND x.callback_id IS NOT NULL) AS waiting) w
     GROUP BY c.queue
), dead AS (
    SELECT queue, count(*) AS dlq FROM awa.dlq_entries GROUP BY queue
), queues AS (
    SELECT queue FROM awa.queue_lanes
    UNION SELECT queue FROM scheduled
    UNION SELECT queue FROM retryable
    UNION SELECT queue FROM dead
)
SELECT q.queue,
       coalesce(w.available, 0)::integer AS available,
       coalesce(s.scheduled, 0)::integer AS scheduled,
       coalesce(y.retryable, 0)::integer AS retryable,
       coalesce(n.running, 0)::integer AS running,
       greatest(coalesce(extract(epoch FROM now() - w.oldest_run_at), 0), 0)::double precision
           AS lag_s,
       coalesce(n.waiting_external, 0)::integer AS waiting_external,
       coalesce(x.dlq, 0)::integer AS dlq
  FROM queues q
  LEFT JOIN waiting w ON w.queue = q.queue
  LEFT JOIN scheduled s ON s.queue = q.queue
  LEFT JOIN retryable y ON y.queue = q.queue
  LEFT JOIN running n ON n.queue = q.queue
  LEFT JOIN dead x ON x.queue = q.queue
 ORDER BY q.queue
