-- Ring maintenance: rotating and pruning the queue ring and the lease ring.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- True when any queue-ring table holds a row in slot p_slot.
CREATE OR REPLACE FUNCTION awa.queue_slot_has_rows(p_slot integer) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM awa.ready_entries WHERE ready_slot = p_slot)
        OR EXISTS (SELECT 1 FROM awa.claim_receipts WHERE ready_slot = p_slot)
        OR EXISTS (SELECT 1 FROM awa.done_entries WHERE ready_slot = p_slot)
        OR EXISTS (SELECT 1 FROM awa.ready_tombstones WHERE ready_slot = p_slot)
$$;

-- Appends the next queue-ring cursor, or says why not. 'skipped_idle': the current slot holds
-- nothing, so there is nothing to seal (an idle ring stops rotating and writes nothing);
-- 'skipped_busy': the incoming slot still holds rows its prune has not reclaimed;
-- 'skipped_locked': another rotation or prune is running. The append is a compare-and-swap on
-- the generation primary key, so two rotators can never both advance.
CREATE OR REPLACE FUNCTION awa.rotate_queue_ring(p_keep integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_current record;
    v_next integer;
BEGIN
    -- 1096237394 = 'AWAR': serialises rotate and prune of the queue ring (objid 1).
    IF NOT pg_try_advisory_xact_lock(1096237394, 1) THEN
        RETURN 'skipped_locked';
    END IF;
    SELECT r.generation, r.slot INTO v_current
      FROM awa.queue_ring_rotations r ORDER BY r.generation DESC LIMIT 1;
    IF NOT awa.queue_slot_has_rows(v_current.slot) THEN
        RETURN 'skipped_idle';
    END IF;
    v_next := (v_current.slot + 1) % (SELECT slot_count FROM awa.ring_config WHERE ring = 'queue');
    IF awa.queue_slot_has_rows(v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    INSERT INTO awa.queue_ring_rotations (generation, slot)
    VALUES (v_current.generation + 1, v_next) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'skipped_locked';
    END IF;
    -- Only the newest generation is read; the last p_keep are kept as a record of recent
    -- rotations. One row goes per rotation, read past by the cursor's backward index scan.
    DELETE FROM awa.queue_ring_rotations r WHERE r.generation <= v_current.generation + 1 - p_keep;
    RETURN 'rotated';
END
$$;

-- Why slot p_slot may not be truncated yet, or NULL when it may: a completed job still inside
-- its retention, an unclaimed (and not tombstoned) ready row, or an open receipt (claimed, not
-- closed), the first found in that order. Failed and cancelled history inside its retention
-- does not block: prune carries it forward.
CREATE OR REPLACE FUNCTION awa.queue_slot_blocker(p_slot integer, p_completed_retention_s double precision)
RETURNS text LANGUAGE sql STABLE AS $$
    -- Retention first: it finds a recent closure at once, where the two other proofs anti-join
    -- every row of the slot when nothing is pending or open. With completed jobs kept for an
    -- hour, the oldest sealed slot of a busy ring holds up to an hour of jobs and is asked again
    -- every ring interval until they age out.
    SELECT CASE
        WHEN EXISTS (
            SELECT 1 FROM awa.done_entries d
             WHERE d.ready_slot = p_slot AND d.outcome = 'completed'
               AND d.finalized_at > now() - make_interval(secs => p_completed_retention_s))
            THEN 'retention'
        WHEN EXISTS (
            SELECT 1 FROM awa.ready_entries r
             WHERE r.ready_slot = p_slot
               AND NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                                WHERE c.job_id = r.job_id AND c.run_lease = r.run_lease + 1
                                  AND c.ready_slot = p_slot)
               AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                                WHERE t.ready_slot = p_slot AND t.queue = r.queue
                                  AND t.priority = r.priority AND t.shard = r.shard
                                  AND t.lane_seq = r.lane_seq))
            THEN 'pending_ready'
        WHEN EXISTS (
            SELECT 1 FROM awa.claim_receipts c
             WHERE c.ready_slot = p_slot
               AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                                WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                                  AND d.ready_slot = p_slot))
            THEN 'open_attempt'
    END
$$;

-- Truncates the oldest sealed queue-ring slot when it is proven inactive, and returns what
-- happened ('pruned', 'nothing_to_prune', 'skipped_locked', or the blocker's name).
--
-- DESIGN.md §3 property 4: the proof runs once cheaply, then again after taking ACCESS
-- EXCLUSIVE locks on the slot's partitions under a short lock_timeout, so a row that committed
-- while we waited is seen before anything is truncated. Failed and cancelled jobs still inside
-- p_failed_retention_s are first copied out of the ring into awa.terminal_history (a plain
-- table with its own retention), so their history survives the prune without keeping the ring
-- busy.
CREATE OR REPLACE FUNCTION awa.prune_queue_ring(
    p_completed_retention_s double precision, p_failed_retention_s double precision,
    p_lock_timeout_ms integer
) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_current record;
    v_slots integer;
    v_slot integer;
    v_blocker text;
    v_cutoff timestamptz := now() - make_interval(secs => p_failed_retention_s);
BEGIN
    IF NOT pg_try_advisory_xact_lock(1096237394, 1) THEN
        RETURN 'skipped_locked';
    END IF;
    SELECT r.generation, r.slot INTO v_current
      FROM awa.queue_ring_rotations r ORDER BY r.generation DESC LIMIT 1;
    SELECT slot_count INTO v_slots FROM awa.ring_config WHERE ring = 'queue';
    -- Slots after the current one, in ring order, are oldest first.
    FOR v_step IN 1 .. v_slots - 1 LOOP
        v_slot := (v_current.slot + v_step) % v_slots;
        EXIT WHEN awa.queue_slot_has_rows(v_slot);
        v_slot := NULL;
    END LOOP;
    IF v_slot IS NULL THEN
        RETURN 'nothing_to_prune';
    END IF;
    v_blocker := awa.queue_slot_blocker(v_slot, p_completed_retention_s);
    IF v_blocker IS NOT NULL THEN
        RETURN v_blocker;
    END IF;
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    BEGIN
        EXECUTE format('LOCK TABLE awa.%I, awa.%I, awa.%I, awa.%I, awa.%I '
                       'IN ACCESS EXCLUSIVE MODE',
                       'ready_entries_' || v_slot, 'lane_commits_' || v_slot,
                       'claim_receipts_' || v_slot, 'done_entries_' || v_slot,
                       'ready_tombstones_' || v_slot);
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'skipped_locked';
    END;
    v_blocker := awa.queue_slot_blocker(v_slot, p_completed_retention_s);
    IF v_blocker IS NOT NULL THEN
        RETURN v_blocker;
    END IF;

    -- Failed and cancelled jobs whose terminal fact is in this slot leave the ring as one
    -- hydrated row each, with their saved progress and checkpoint; the attempt state of every
    -- job that ends here is then released.
    INSERT INTO awa.terminal_history (job_id, run_lease, state, kind, queue, priority, args,
                                      attempt, max_attempts, run_at, created_at, metadata,
                                      tags, errors, progress, checkpoint, finalized_at)
    SELECT j.job_id, j.run_lease, j.state, j.kind, j.queue, j.priority, j.args, j.attempt,
           j.max_attempts, j.run_at, j.created_at, j.metadata, j.tags, j.errors, s.progress,
           s.checkpoint, j.finalized_at
      FROM awa.jobs j
      LEFT JOIN awa.attempt_state s ON s.job_id = j.job_id
     WHERE j.job_id IN (SELECT d.job_id FROM awa.done_entries d
                         WHERE d.ready_slot = v_slot AND d.outcome IN ('failed', 'cancelled')
                        UNION
                        SELECT t.job_id FROM awa.ready_tombstones t WHERE t.ready_slot = v_slot)
       AND j.state IN ('failed', 'cancelled') AND j.finalized_at > v_cutoff
    ON CONFLICT (job_id) DO NOTHING;
    DELETE FROM awa.attempt_state s
     WHERE s.job_id IN (SELECT d.job_id FROM awa.done_entries d
                         WHERE d.ready_slot = v_slot
                           AND d.outcome IN ('completed', 'failed', 'cancelled')
                        UNION
                        SELECT t.job_id FROM awa.ready_tombstones t WHERE t.ready_slot = v_slot);
    -- A purge marker is needed while any ring row of its job remains: it goes with the last
    -- slot holding one. Markers are few (one per purged job still in the ring), each checked
    -- through the ready rows' job_id index.
    DELETE FROM awa.purged_jobs p
     WHERE NOT EXISTS (SELECT 1 FROM awa.ready_entries o
                        WHERE o.job_id = p.job_id AND o.ready_slot <> v_slot);

    EXECUTE format('TRUNCATE awa.%I, awa.%I, awa.%I, awa.%I, awa.%I',
                   'ready_entries_' || v_slot, 'lane_commits_' || v_slot,
                   'claim_receipts_' || v_slot, 'done_entries_' || v_slot,
                   'ready_tombstones_' || v_slot);
    RETURN 'pruned';
END
$$;

-- The lease ring: rotate when the incoming slot is empty, prune (truncate) the oldest non-current
-- slot once every lease in it has been deleted. Both only under the lease-ring lock (objid 2).
CREATE OR REPLACE FUNCTION awa.rotate_lease_ring(p_keep integer) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_current record;
    v_next integer;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1096237394, 2) THEN
        RETURN 'skipped_locked';
    END IF;
    SELECT r.generation, r.slot INTO v_current
      FROM awa.lease_ring_rotations r ORDER BY r.generation DESC LIMIT 1;
    IF NOT EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_current.slot) THEN
        RETURN 'skipped_idle';
    END IF;
    v_next := (v_current.slot + 1) % (SELECT slot_count FROM awa.ring_config WHERE ring = 'lease');
    IF EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_next) THEN
        RETURN 'skipped_busy';
    END IF;
    INSERT INTO awa.lease_ring_rotations (generation, slot)
    VALUES (v_current.generation + 1, v_next) ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN 'skipped_locked';
    END IF;
    -- Only the newest generation is read; the last p_keep are kept as a record of recent
    -- rotations. One row goes per rotation, read past by the cursor's backward index scan.
    DELETE FROM awa.lease_ring_rotations r WHERE r.generation <= v_current.generation + 1 - p_keep;
    RETURN 'rotated';
END
$$;

CREATE OR REPLACE FUNCTION awa.prune_lease_ring(p_lock_timeout_ms integer) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_current integer;
    v_slots integer;
    v_slot integer;
    v_pruned integer := 0;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1096237394, 2) THEN
        RETURN 'skipped_locked';
    END IF;
    SELECT r.slot INTO v_current FROM awa.lease_ring_rotations r
     ORDER BY r.generation DESC LIMIT 1;
    SELECT slot_count INTO v_slots FROM awa.ring_config WHERE ring = 'lease';
    -- A heartbeat racing the attempt's closure can re-create a lease the closure just deleted;
    -- such orphans (closed attempt, or receipt already pruned) are removed here so the lease
    -- slot can empty and be truncated.
    DELETE FROM awa.leases x
     WHERE EXISTS (SELECT 1 FROM awa.done_entries d
                    WHERE d.job_id = x.job_id AND d.run_lease = x.run_lease)
        OR NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                        WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease);
    PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
    FOR v_step IN 1 .. v_slots - 1 LOOP
        v_slot := (v_current + v_step) % v_slots;
        -- Only slots whose every lease was deleted; the truncate drops their dead versions.
        CONTINUE WHEN EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot);
        BEGIN
            EXECUTE format('LOCK TABLE awa.%I IN ACCESS EXCLUSIVE MODE', 'leases_' || v_slot);
        EXCEPTION WHEN lock_not_available THEN
            CONTINUE;
        END;
        CONTINUE WHEN EXISTS (SELECT 1 FROM awa.leases WHERE lease_slot = v_slot);
        IF pg_relation_size(format('awa.%I', 'leases_' || v_slot)) > 0 THEN
            EXECUTE format('TRUNCATE awa.%I', 'leases_' || v_slot);
            v_pruned := v_pruned + 1;
        END IF;
    END LOOP;
    RETURN CASE WHEN v_pruned > 0 THEN 'pruned' ELSE 'nothing_to_prune' END;
END
$$;
