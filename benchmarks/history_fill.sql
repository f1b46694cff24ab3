-- The history builder's statements (benchmarks/history_fill.py): the queue's own functions,
-- called set-based on the server so that a chunk of jobs never travels to the client.

-- name: create_claimed
-- The receipt addresses of the chunk being built, between its claim and its close (the
-- builder's session only).
CREATE TEMPORARY TABLE IF NOT EXISTS fill_claimed (
    ready_slot integer, queue text, priority smallint, shard smallint, lane_seq bigint,
    job_id bigint, run_lease bigint, attempt integer)

-- name: claim_chunk
-- Claims up to `limit` jobs of one queue as a worker's dispatcher does (awa.claim_ready with
-- the queue's deadline, aging and order, its own statement and commit), in one call, and keeps
-- their addresses for the close.
WITH emptied AS (DELETE FROM fill_claimed)
INSERT INTO fill_claimed (ready_slot, queue, priority, shard, lane_seq, job_id, run_lease,
                          attempt)
SELECT ready_slot, queue, priority, shard, lane_seq, job_id, run_lease, attempt
  FROM awa.claim_ready(%(queue)s, %(limit)s::integer, %(claimed_by)s,
                       %(deadline_s)s::double precision, %(aging_s)s::double precision,
                       %(sequential)s::boolean)

-- name: claimed_chunk
-- How many jobs the claim took, and how many of them are the chunk's (ids first_id..last_id).
SELECT count(*), count(*) FILTER (WHERE job_id BETWEEN %(first_id)s AND %(last_id)s)
  FROM fill_claimed

-- name: close_chunk
-- Closes the chunk's attempts with one outcome, as a worker's completer does (awa.close_batch,
-- one item per receipt: its address, the outcome, a failure's error, and no result, as a
-- handler that returns None leaves).
SELECT count(*) FROM awa.close_batch((
    SELECT coalesce(json_agg(json_build_object(
               'ready_slot', c.ready_slot, 'queue', c.queue, 'priority', c.priority,
               'shard', c.shard, 'lane_seq', c.lane_seq, 'job_id', c.job_id,
               'run_lease', c.run_lease, 'outcome', %(outcome)s::text,
               'error', CASE WHEN %(error_type)s::text IS NOT NULL THEN json_build_object(
                   'attempt', c.attempt, 'at', now(), 'type', %(error_type)s::text,
                   'message', %(error_message)s::text || ' ' || c.job_id,
                   'traceback', '') END)), '[]')
      FROM fill_claimed c))

-- name: rotate_rings
-- The leader's ring pass (awa_django/maintenance/rings.py) without its prune: the history is
-- all inside the shipped retention (a day).
SELECT awa.rotate_queue_ring(%(keep)s::integer), awa.rotate_lease_ring(%(keep)s::integer)
