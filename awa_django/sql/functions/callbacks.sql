-- External callbacks: registering, parking, resuming and reading them.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- External waits (docs/callbacks.md). A handler registers a callback on its attempt's lease:
-- callback_id and callback_timeout_at are set while the attempt waits on an outside system
-- (queue health counts such leases as waiting_external). A parked attempt (the handler returned
-- WaitForCallback and gave its worker slot back) also has callback_parked_at; a sequential wait
-- that was resumed holds the payload until its handler takes it, which clears the callback.
-- While a callback is registered the attempt is rescued only at callback_timeout_at: nobody
-- heartbeats a parked attempt, and the queue's deadline was sized for running, not waiting.
-- A resumed attempt runs against a fresh deadline (lease deadline_at) of the queue's length.
-- These writes touch the lease ring only, never a queue-ring table.

-- Where callback p_callback_id of attempt (p_job_id, p_run_lease) stands: 'unknown' (no such
-- attempt), 'closed:<outcome>' (the attempt has closed), 'resumed' (a resume payload waits for
-- its handler), 'waiting' (registered, unresolved) or 'replaced' (the attempt is open but this
-- callback is not registered on it any more).
CREATE OR REPLACE FUNCTION awa.callback_status(p_job_id bigint, p_run_lease bigint, p_callback_id uuid)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                          WHERE c.job_id = p_job_id AND c.run_lease = p_run_lease)
            THEN 'unknown'
        WHEN EXISTS (SELECT 1 FROM awa.done_entries d
                      WHERE d.job_id = p_job_id AND d.run_lease = p_run_lease)
            THEN 'closed:' || (SELECT d.outcome FROM awa.done_entries d
                                WHERE d.job_id = p_job_id AND d.run_lease = p_run_lease LIMIT 1)
        WHEN EXISTS (SELECT 1 FROM awa.leases x
                      WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease
                        AND x.callback_id = p_callback_id AND x.callback_resumed_at IS NOT NULL)
            THEN 'resumed'
        WHEN EXISTS (SELECT 1 FROM awa.leases x
                      WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease
                        AND x.callback_id = p_callback_id)
            THEN 'waiting'
        ELSE 'replaced'
    END
$$;

-- Registers callback p_callback_id on an open attempt, replacing any earlier one, and returns
-- its timeout; NULL when the attempt is not open. The lease is materialized if the attempt has
-- not heartbeated yet.
CREATE OR REPLACE FUNCTION awa.register_callback(p_job_id bigint, p_run_lease bigint, p_callback_id uuid,
                                      p_timeout_s double precision, p_claimed_by text)
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    v_receipt record;
    v_timeout_at timestamptz := now() + make_interval(secs => p_timeout_s);
BEGIN
    SELECT c.* INTO v_receipt FROM awa.claim_receipts c
     WHERE c.job_id = p_job_id AND c.run_lease = p_run_lease;
    IF NOT FOUND OR EXISTS (SELECT 1 FROM awa.done_entries d
                             WHERE d.job_id = p_job_id AND d.run_lease = p_run_lease) THEN
        RETURN NULL;
    END IF;
    UPDATE awa.leases x
       SET callback_id = p_callback_id, callback_timeout_at = v_timeout_at,
           callback_parked_at = NULL, callback_resumed_at = NULL, callback_payload = NULL
     WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease;
    IF NOT FOUND THEN
        INSERT INTO awa.leases (job_id, run_lease, lease_slot, ready_slot, queue, priority, shard,
                                lane_seq, claimed_by, callback_id, callback_timeout_at)
        VALUES (p_job_id, p_run_lease,
                (SELECT r.slot FROM awa.lease_ring_rotations r ORDER BY r.generation DESC LIMIT 1),
                v_receipt.ready_slot, v_receipt.queue, v_receipt.priority, v_receipt.shard,
                v_receipt.lane_seq, p_claimed_by, p_callback_id, v_timeout_at)
        ON CONFLICT (job_id, run_lease, lease_slot) DO UPDATE
           SET callback_id = excluded.callback_id,
               callback_timeout_at = excluded.callback_timeout_at,
               callback_parked_at = NULL, callback_resumed_at = NULL, callback_payload = NULL;
    END IF;
    RETURN v_timeout_at;
END
$$;

-- Marks a registered callback as parked (its handler returned and freed the worker slot) and
-- returns awa.callback_status as it was: 'waiting' means it is now parked.
CREATE OR REPLACE FUNCTION awa.park_callback(p_job_id bigint, p_run_lease bigint, p_callback_id uuid)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    UPDATE awa.leases x SET callback_parked_at = now()
     WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease AND x.callback_id = p_callback_id
       AND x.callback_resumed_at IS NULL;
    RETURN awa.callback_status(p_job_id, p_run_lease, p_callback_id);
END
$$;

-- Locks the lease of a callback for an external resolution and says where it stands; for a
-- 'waiting' callback also returns its attempt, for the guarded close. Locking the lease first
-- serialises resolutions of one callback (complete, fail, retry, resume, heartbeat) and the
-- callback-timeout rescue, which takes the same lock before it closes.
CREATE OR REPLACE FUNCTION awa.lock_callback(p_job_id bigint, p_run_lease bigint, p_callback_id uuid)
RETURNS TABLE (status text, job awa.claimed_job) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM awa.leases x
      WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease AND x.callback_id = p_callback_id
      FOR UPDATE;
    status := awa.callback_status(p_job_id, p_run_lease, p_callback_id);
    IF status = 'waiting' THEN
        job := (SELECT ROW(c.queue, c.priority, c.shard, c.lane_seq, c.ready_slot, c.job_id,
                           r.kind, r.args, c.attempt, c.run_lease, r.max_attempts, r.run_at,
                           r.created_at, r.metadata, r.tags, r.errors, NULL::jsonb,
                           NULL::jsonb)::awa.claimed_job
                  FROM awa.claim_receipts c
                  JOIN awa.ready_entries r
                    ON r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
                   AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
                 WHERE c.job_id = p_job_id AND c.run_lease = p_run_lease);
    END IF;
    RETURN NEXT;
END
$$;

-- Hands a resumed payload to the waiting handler and clears the callback (the attempt is running
-- again); returns the callback's status before the take, and the payload when it was 'resumed'.
CREATE OR REPLACE FUNCTION awa.take_callback_payload(p_job_id bigint, p_run_lease bigint,
                                          p_callback_id uuid)
RETURNS TABLE (status text, payload jsonb) LANGUAGE plpgsql AS $$
BEGIN
    SELECT x.callback_payload INTO payload FROM awa.leases x
     WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease AND x.callback_id = p_callback_id
       AND x.callback_resumed_at IS NOT NULL
       FOR UPDATE;
    IF FOUND THEN
        UPDATE awa.leases x
           SET callback_id = NULL, callback_timeout_at = NULL, callback_parked_at = NULL,
               callback_resumed_at = NULL, callback_payload = NULL, heartbeat_at = now()
         WHERE x.job_id = p_job_id AND x.run_lease = p_run_lease
           AND x.callback_id = p_callback_id;
        status := 'resumed';
    ELSE
        status := awa.callback_status(p_job_id, p_run_lease, p_callback_id);
    END IF;
    RETURN NEXT;
END
$$;
