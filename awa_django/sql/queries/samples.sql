-- Queue samples: the leader's per-queue samples and their rollups, and the reads behind
-- awa.queues and the admin's queue health page.

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
    SELECT * FROM unnest(%(queue)s::text[], %(available)s::integer[], %(scheduled)s::integer[],
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

-- name: roll_up_minutes
-- Compacts the minutes that ended at least %(settle_s)s ago and are not rolled up yet (at most
-- %(catch_up_s)s back) into 1-minute buckets: per queue (kind '') the closures counted and the
-- peak of each depth the leader's samples saw; per queue and kind the closures only. Closures are
-- read through the BRIN index on done_entries.finalized_at, and each one's kind from its ready
-- entry by that table's primary key (the ring prunes both together): no write on the job path.
WITH bounds AS (
    SELECT greatest(
               (SELECT max(bucket_at) FROM awa.queue_stat_rollups WHERE resolution_s = 60)
                   + interval '1 minute',
               date_bin('1 minute', now() - make_interval(secs => %(catch_up_s)s::double precision),
                        timestamptz '2000-01-01 00:00:00+00')) AS since,
           date_bin('1 minute', now() - make_interval(secs => %(settle_s)s::double precision),
                    timestamptz '2000-01-01 00:00:00+00') AS until
), closed AS (
    SELECT d.queue,
           CASE WHEN grouping(r.kind) = 1 THEN '' ELSE coalesce(r.kind, '(pruned)') END AS kind,
           date_bin('1 minute', d.finalized_at, timestamptz '2000-01-01 00:00:00+00')
               AS bucket_at,
           count(*) FILTER (WHERE d.outcome = 'completed')::integer AS completed,
           count(*) FILTER (WHERE d.outcome = 'failed')::integer AS failed
      FROM bounds b
      JOIN awa.done_entries d ON d.finalized_at >= b.since AND d.finalized_at < b.until
      LEFT JOIN awa.ready_entries r
             ON r.queue = d.queue AND r.priority = d.priority AND r.shard = d.shard
            AND r.lane_seq = d.lane_seq AND r.ready_slot = d.ready_slot
     WHERE d.outcome IN ('completed', 'failed')
     GROUP BY GROUPING SETS (
         (d.queue, date_bin('1 minute', d.finalized_at, timestamptz '2000-01-01 00:00:00+00')),
         (d.queue, r.kind,
          date_bin('1 minute', d.finalized_at, timestamptz '2000-01-01 00:00:00+00')))
), depths AS (
    SELECT s.queue,
           date_bin('1 minute', s.sampled_at, timestamptz '2000-01-01 00:00:00+00') AS bucket_at,
           max(s.available) AS available, max(s.scheduled) AS scheduled,
           max(s.retryable) AS retryable, max(s.running) AS running, max(s.dlq) AS dlq
      FROM bounds b
      JOIN awa.queue_stat_samples s ON s.sampled_at >= b.since AND s.sampled_at < b.until
     GROUP BY 1, 2
), queues AS (
    SELECT coalesce(c.queue, p.queue) AS queue, '' AS kind,
           coalesce(c.bucket_at, p.bucket_at) AS bucket_at,
           coalesce(c.completed, 0) AS completed, coalesce(c.failed, 0) AS failed,
           p.available, p.scheduled, p.retryable, p.running, p.dlq
      FROM (SELECT * FROM closed WHERE kind = '') c
      FULL JOIN depths p ON p.queue = c.queue AND p.bucket_at = c.bucket_at
)
INSERT INTO awa.queue_stat_rollups (resolution_s, queue, kind, bucket_at, completed, failed,
                                    available, scheduled, retryable, running, dlq)
SELECT 60, queue, kind, bucket_at, completed, failed, available, scheduled, retryable, running,
       dlq
  FROM queues
UNION ALL
SELECT 60, queue, kind, bucket_at, completed, failed, NULL, NULL, NULL, NULL, NULL
  FROM closed WHERE kind <> ''
ON CONFLICT DO NOTHING

-- name: roll_up_quarters
-- Compacts the 1-minute buckets of every quarter hour whose minutes are all rolled up (and that
-- is not yet, at most %(catch_up_s)s back) into 15-minute buckets: counts summed, depths' peak.
WITH bounds AS (
    SELECT greatest(
               (SELECT max(bucket_at) FROM awa.queue_stat_rollups WHERE resolution_s = 900)
                   + interval '15 minutes',
               date_bin('15 minutes',
                        now() - make_interval(secs => %(catch_up_s)s::double precision),
                        timestamptz '2000-01-01 00:00:00+00')) AS since,
           date_bin('15 minutes',
                    (SELECT max(bucket_at) FROM awa.queue_stat_rollups WHERE resolution_s = 60)
                        + interval '1 minute',
                    timestamptz '2000-01-01 00:00:00+00') AS until
)
INSERT INTO awa.queue_stat_rollups (resolution_s, queue, kind, bucket_at, completed, failed,
                                    available, scheduled, retryable, running, dlq)
SELECT 900, m.queue, m.kind,
       date_bin('15 minutes', m.bucket_at, timestamptz '2000-01-01 00:00:00+00'),
       sum(m.completed)::integer, sum(m.failed)::integer, max(m.available), max(m.scheduled),
       max(m.retryable), max(m.running), max(m.dlq)
  FROM bounds b
  JOIN awa.queue_stat_rollups m
    ON m.resolution_s = 60 AND m.bucket_at >= b.since AND m.bucket_at < b.until
 GROUP BY 1, 2, 3, 4
ON CONFLICT DO NOTHING

-- name: trim_rollups
-- Drops the buckets of each resolution older than its kept window.
DELETE FROM awa.queue_stat_rollups
 WHERE (resolution_s = 60
        AND bucket_at < now() - make_interval(secs => %(keep_minutes_s)s::double precision))
    OR (resolution_s = 900
        AND bucket_at < now() - make_interval(secs => %(keep_quarters_s)s::double precision))

-- name: queue_rollups
-- The buckets of one resolution over the last window, per queue (kind '') or per queue and kind
-- (the others), oldest first.
SELECT queue, kind, bucket_at, completed, failed, available, scheduled, retryable, running, dlq
  FROM awa.queue_stat_rollups
 WHERE resolution_s = %(resolution_s)s
   AND bucket_at > now() - make_interval(secs => %(window_s)s::double precision)
   AND (kind = '') = %(per_queue)s
 ORDER BY bucket_at, queue, kind
