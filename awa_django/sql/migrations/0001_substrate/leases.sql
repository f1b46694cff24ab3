-- Materialized execution: the lease ring and the attempt state kept across attempts.
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

-- A lease is the mutable record of an attempt that lives long enough to heartbeat. Short
-- attempts never get one: their receipt is enough. A lease is created by the owning worker's
-- first heartbeat, updated by later ones and deleted when the attempt closes; whole lease slots
-- are truncated once empty, which reclaims the dead versions heartbeats leave behind.
CREATE TABLE awa.leases (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    lease_slot integer NOT NULL,
    ready_slot integer NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    lane_seq bigint NOT NULL,
    claimed_by text NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    materialized_at timestamptz NOT NULL DEFAULT now(),
    -- A parked or sequential external wait: set while a callback is registered and unresolved
    -- (see "callbacks" at the end of this file); rescue closes it once callback_timeout_at
    -- has passed.
    callback_id uuid,
    callback_timeout_at timestamptz,
    -- The handler returned WaitForCallback and freed its worker slot.
    callback_parked_at timestamptz,
    -- A sequential wait was resumed; its payload waits here for the handler to take it.
    callback_resumed_at timestamptz,
    callback_payload jsonb,
    -- A resumed attempt's fresh hard deadline; NULL: the claim's deadline_at applies.
    deadline_at timestamptz,
    CONSTRAINT leases_callback_timeout
        CHECK ((callback_id IS NULL) = (callback_timeout_at IS NULL)),
    PRIMARY KEY (job_id, run_lease, lease_slot)
) PARTITION BY LIST (lease_slot);

CREATE TABLE awa.lease_ring_rotations (
    generation bigint PRIMARY KEY,
    slot integer NOT NULL,
    rotated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO awa.lease_ring_rotations (generation, slot) VALUES (0, 0);

DO $$
DECLARE
    v_slots constant integer := 8;
BEGIN
    INSERT INTO awa.ring_config (ring, slot_count) VALUES ('lease', v_slots);
    FOR v_slot IN 0 .. v_slots - 1 LOOP
        EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.leases FOR VALUES IN (%s)',
                       'leases_' || v_slot, v_slot);
    END LOOP;
END
$$;

-- Progress and checkpoint of a job, kept across its attempts (retry, snooze, rescue, cancel,
-- failure) and deleted when it completes. Written only by heartbeat flushes and non-successful
-- closures, so it sees a few writes per long or failing job, none for a short successful one.
CREATE TABLE awa.attempt_state (
    job_id bigint PRIMARY KEY,
    run_lease bigint NOT NULL,
    progress jsonb,
    checkpoint jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);
