-- Heartbeats of live attempts.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Keeps a batch of one worker's live attempts alive and saves their reported progress, in one
-- statement; returns the attempts that are still open. An attempt missing from the result was
-- closed by someone else (rescue, cancel): the worker raises its cancel flag.
-- The first heartbeat of an attempt materializes its lease in the current lease slot; later
-- ones update heartbeat_at. Progress is saved only for attempts whose lease is current.
CREATE OR REPLACE FUNCTION awa.heartbeat_attempts(
    p_ready_slot integer[], p_queue text[], p_priority smallint[], p_shard smallint[],
    p_lane_seq bigint[], p_job_id bigint[], p_run_lease bigint[], p_progress jsonb[],
    p_checkpoint jsonb[], p_claimed_by text
) RETURNS TABLE (job_id bigint, run_lease bigint) LANGUAGE sql AS $$
    WITH batch AS (
        SELECT * FROM unnest(p_ready_slot, p_queue, p_priority, p_shard, p_lane_seq, p_job_id,
                             p_run_lease, p_progress, p_checkpoint)
            AS b(ready_slot, queue, priority, shard, lane_seq, job_id, run_lease, progress,
                 checkpoint)
    ), open AS (
        SELECT b.*
          FROM batch b
          JOIN awa.claim_receipts c
            ON c.job_id = b.job_id AND c.run_lease = b.run_lease AND c.ready_slot = b.ready_slot
         WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries d
                            WHERE d.job_id = b.job_id AND d.run_lease = b.run_lease
                              AND d.ready_slot = b.ready_slot)
    ), beat AS (
        UPDATE awa.leases x SET heartbeat_at = now()
          FROM open o WHERE x.job_id = o.job_id AND x.run_lease = o.run_lease
        RETURNING x.job_id, x.run_lease
    ), materialized AS (
        INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority,
                                shard, lane_seq, claimed_by)
        SELECT o.job_id, o.run_lease,
               (SELECT r.slot FROM awa.lease_ring_rotations r ORDER BY r.generation DESC LIMIT 1),
               o.ready_slot, o.queue, o.priority, o.shard, o.lane_seq, p_claimed_by
          FROM open o
         WHERE NOT EXISTS (SELECT 1 FROM beat b
                            WHERE b.job_id = o.job_id AND b.run_lease = o.run_lease)
    ), saved AS (
        INSERT INTO awa.attempt_state (job_id, run_lease, progress, checkpoint)
        SELECT o.job_id, o.run_lease, o.progress, o.checkpoint
          FROM open o WHERE o.progress IS NOT NULL OR o.checkpoint IS NOT NULL
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = excluded.run_lease,
               progress = coalesce(excluded.progress, awa.attempt_state.progress),
               checkpoint = coalesce(excluded.checkpoint, awa.attempt_state.checkpoint),
               updated_at = now()
         WHERE awa.attempt_state.run_lease <= excluded.run_lease
    )
    SELECT o.job_id, o.run_lease FROM open o
$$;
