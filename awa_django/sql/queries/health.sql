-- Queue health: the leader's samples, pause/resume/drain, and the reads behind awa.queues.

-- name: record_queue_samples
-- Appends one sample per measured queue: its depths, and the completions and failures closed
-- since the previous pass (found through the BRIN index on done_entries.finalized_at; the
-- first pass counts one interval back).
WITH since AS (
    SELECT coalesce(max(sampled_at), now() - make_interval(secs => %(interval_s)s::double precision))
           AS at
      FROM awa.queue_stat_samples
), closed AS (
    SELECT d.queue,
           count(*) FILTER (WHERE d.outcome = 'completed') AS completed,
           count(*) FILTER (WHERE d.outcome = 'failed') AS failed
      FROM awa.done_entries d, since
     WHERE d.finalized_at > since.at AND d.finalized_at <= now()
     GROUP BY d.queue
), batch AS (
    SELECT * FROM unnest(%(queues)s::text[], %(available)s::integer[], %(scheduled)s::integer[],
                         %(retryable)s::integer[], %(running)s::integer[],
                         %(waiting_external)s::integer[], %(dlq)s::integer[],
                         %(lag_s)s::double precision[])
        AS b(queue, available, scheduled, retryable, running, waiting_external, dlq, lag_s)
)
INSERT INTO awa.queue_stat_samples (queue, sampled_at, available, scheduled, retryable, running,
                                    waiting_external, dlq, lag_s, completed, failed)
SELECT b.queue, now(), b.available, b.scheduled, b.retryable, b.running, b.waiting_external,
       b.dlq, b.lag_s, coalesce(c.completed, 0), coalesce(c.failed, 0)
  FROM batch b LEFT JOIN closed c ON c.queue = b.queue
ON CONFLICT (queue, sampled_at) DO NOTHING

-- name: trim_queue_samples
-- Drops samples older than the kept window.
DELETE FROM awa.queue_stat_samples
 WHERE sampled_at < now() - make_interval(secs => %(keep_s)s::double precision)

-- name: queue_sample_totals
-- Per queue over the samples of the last window: completions, failures, and completions of the
-- last five minutes (throughput).
SELECT queue, sum(completed)::integer AS completed, sum(failed)::integer AS failed,
       coalesce(sum(completed) FILTER (WHERE sampled_at > now() - interval '5 minutes'), 0)
           ::integer AS completed_5m
  FROM awa.queue_stat_samples
 WHERE sampled_at > now() - make_interval(secs => %(window_s)s::double precision)
 GROUP BY queue

-- name: unsampled_closures
-- Per queue: the attempts closed as completed and as failed after the newest sample, which no
-- sample counts yet (all of the window's when no leader has sampled in it), and the completions
-- among them in the last five minutes. Read through the BRIN index on
-- done_entries.finalized_at, from the same boundary the next sample will count from.
WITH since AS (
    SELECT greatest(coalesce(max(s.sampled_at), '-infinity'::timestamptz),
                    now() - make_interval(secs => %(window_s)s::double precision)) AS at
      FROM awa.queue_stat_samples s
)
SELECT d.queue,
       count(*) FILTER (WHERE d.outcome = 'completed')::integer AS completed,
       count(*) FILTER (WHERE d.outcome = 'failed')::integer AS failed,
       count(*) FILTER (WHERE d.outcome = 'completed'
                          AND d.finalized_at > now() - interval '5 minutes')::integer
           AS completed_5m
  FROM awa.done_entries d, since
 WHERE d.finalized_at > since.at AND d.finalized_at <= now()
 GROUP BY d.queue

-- name: queue_samples
-- The samples of one queue (or all, when NULL) over the last window, oldest first.
SELECT queue, sampled_at, available, scheduled, retryable, running, waiting_external, dlq,
       lag_s, completed, failed
  FROM awa.queue_stat_samples
 WHERE sampled_at > now() - make_interval(secs => %(window_s)s::double precision)
   AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
 ORDER BY sampled_at, queue

-- name: queue_seen
-- Whether the queue health page shows the queue from the leader's samples or the ring's
-- closures alone (an undeclared queue emptied or purged since): the samples' primary key leads
-- with the queue; the closures are read through the BRIN index on finalized_at over the window.
SELECT EXISTS (SELECT 1 FROM awa.queue_stat_samples s WHERE s.queue = %(queue)s)
    OR EXISTS (SELECT 1 FROM awa.done_entries d
                WHERE d.queue = %(queue)s
                  AND d.finalized_at > now() - make_interval(secs => %(window_s)s::double precision))

-- name: queue_meta_rows
-- Pause state, DLQ switch and live concurrency of every queue that has a control row.
SELECT queue, paused, paused_at, paused_by, dlq_enabled, concurrency, concurrency_set_at,
       concurrency_set_by
  FROM awa.queue_meta ORDER BY queue

-- name: set_queue_concurrency
-- Sets a queue's live concurrency (NULL: back to each worker's configured value) and tells the
-- workers serving it at commit.
WITH changed AS (
    INSERT INTO awa.queue_meta (queue, concurrency, concurrency_set_at, concurrency_set_by)
    VALUES (%(queue)s, %(concurrency)s, now(), %(by)s)
    ON CONFLICT (queue) DO UPDATE
       SET concurrency = excluded.concurrency,
           concurrency_set_at = excluded.concurrency_set_at,
           concurrency_set_by = excluded.concurrency_set_by
    RETURNING queue
)
SELECT pg_notify('awa_control', queue) FROM changed

-- name: queue_concurrency
-- The live concurrency set for each of the given queues that has one (a worker's read).
SELECT queue, concurrency FROM awa.queue_meta
 WHERE queue = ANY(%(queues)s::text[]) AND concurrency IS NOT NULL

-- name: pause_queue
-- Pauses a queue: workers claim nothing from it and promotion leaves its due jobs deferred.
INSERT INTO awa.queue_meta (queue, paused, paused_at, paused_by)
VALUES (%(queue)s, true, now(), %(by)s)
ON CONFLICT (queue) DO UPDATE SET paused = true, paused_at = now(), paused_by = excluded.paused_by

-- name: resume_queue
-- Resumes a queue and wakes its workers.
WITH resumed AS (
    UPDATE awa.queue_meta SET paused = false, paused_at = NULL, paused_by = NULL
     WHERE queue = %(queue)s AND paused
    RETURNING queue
)
SELECT pg_notify('awa', queue) FROM resumed

-- name: drain_queue
-- Cancels every pending job of a queue; returns how many (see awa.drain_queue).
SELECT awa.drain_queue(%(queue)s, %(reason)s) AS cancelled

-- name: drain_candidates
-- How many jobs a drain of the queue would cancel now: the jobs awa.drain_queue walks (every
-- deferred job of the queue, and each ready row no receipt or tombstone closed), counted once.
SELECT count(*)::integer FROM (
    SELECT d.job_id FROM awa.deferred_jobs d WHERE d.queue = %(queue)s
    UNION
    SELECT r.job_id FROM awa.ready_entries r
     WHERE r.queue = %(queue)s
       AND NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                        WHERE c.job_id = r.job_id AND c.run_lease = r.run_lease + 1
                          AND c.ready_slot = r.ready_slot)
       AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                        WHERE t.queue = r.queue AND t.priority = r.priority
                          AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                          AND t.ready_slot = r.ready_slot)
) pending
