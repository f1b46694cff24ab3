-- Lane layout of a queue: how many enqueue shards it is split into.

-- name: set_enqueue_shards
-- Sets a queue's enqueue shard count (creating its meta row when the queue has none), holding
-- the queue's shard lock (class 'AWAS', see awa.ensure_lanes) to the end of the transaction.
INSERT INTO awa.queue_meta (queue, enqueue_shards)
SELECT %(queue)s, %(shards)s::smallint
  FROM (SELECT pg_advisory_xact_lock(1096237395, hashtext(%(queue)s))) AS shard_lock
ON CONFLICT (queue) DO UPDATE SET enqueue_shards = excluded.enqueue_shards

-- name: create_shard_lanes
-- After set_enqueue_shards, in its transaction: creates the lanes of every shard the queue has
-- now at every priority it has used, so that producers never create one at their commit.
SELECT coalesce(sum(awa.ensure_lanes(%(queue)s, l.priority)), 0)::integer
  FROM (SELECT DISTINCT priority FROM awa.queue_lanes WHERE queue = %(queue)s) AS l

-- name: ensure_lanes
-- Creates the lanes of a queue and priority that do not exist yet on the queue's current
-- shards; returns how many it created. Sent on a connection of its own, in autocommit.
SELECT awa.ensure_lanes(%(queue)s, %(priority)s::smallint)

-- name: enqueue_shards
-- A queue's enqueue shard count (1 when it has no meta row).
SELECT coalesce((SELECT enqueue_shards FROM awa.queue_meta WHERE queue = %(queue)s), 1)

-- name: lane_backlog
-- Waiting (unclaimed, not cancelled) ready rows per lane of a queue, or of every queue when
-- %(queue)s is NULL (the admin's shard page), for operators: it counts every waiting row
-- (awa.waiting_entries), not the claimed rows the ring retains.
SELECT w.queue, w.priority, w.shard, count(*)::integer AS waiting
  FROM awa.waiting_entries(%(queue)s::text) w
 GROUP BY w.queue, w.priority, w.shard
 ORDER BY w.queue, w.priority, w.shard

-- name: enqueue_shard_counts
-- The enqueue shard count of every queue that has a meta row (the others have 1).
SELECT queue, enqueue_shards::integer FROM awa.queue_meta ORDER BY queue

-- name: delete_superseded_lane_marks
-- Deletes one bounded batch of lane marks that are no longer their queue's newest (only the
-- newest is ever read); one row per row deleted.
WITH superseded AS (
    SELECT k.queue, k.mark FROM awa.lane_marks k
     WHERE EXISTS (SELECT 1 FROM awa.lane_marks n WHERE n.queue = k.queue AND n.mark > k.mark)
     ORDER BY k.mark LIMIT %(limit)s::integer
)
DELETE FROM awa.lane_marks k USING superseded s WHERE k.queue = s.queue AND k.mark = s.mark
RETURNING 1
