-- awa substrate, migration 0001: the schema, rings, backlog and control plane (the storage
-- functions are in ../../functions/). See docs/architecture.md for how the pieces fit.
--
-- Hot-path rule (DESIGN.md §3 property 1): enqueue, claim and completion only INSERT into the
-- ring-partitioned tables below, advance sequences and take row/advisory locks. Old history is
-- reclaimed by truncating whole ring partitions, never by UPDATE or DELETE of single rows.
--
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).
--
-- Control plane: the schema, its sequences, ring configuration and cursors, queues and lanes.

CREATE SCHEMA awa;

-- Job ids stay the same for the whole life of a job, across retries and promotions.
CREATE SEQUENCE awa.job_id_seq AS bigint;

-- Numbers the ready rows of a lane in the order their producer wrote them. Only the order within
-- one producer transaction matters: across transactions a lane is ordered by the commit
-- positions of awa.lane_commits. So each backend may take its numbers from a cached range.
CREATE SEQUENCE awa.lane_seq AS bigint CACHE 64;

-- Static ring configuration, written once by this migration.
CREATE TABLE awa.ring_config (
    ring text PRIMARY KEY,
    slot_count integer NOT NULL CHECK (slot_count BETWEEN 2 AND 256)
);

-- Rotation ledger of the queue ring: the current cursor is the row with the highest generation.
-- Rotation appends a row (a compare-and-swap on the primary key) instead of updating a singleton,
-- so the cursor read never walks the dead versions a pinned MVCC horizon keeps; it deletes the
-- generations older than the newest p_keep (1,000 from the leader), which that read scans away
-- from.
CREATE TABLE awa.queue_ring_rotations (
    generation bigint PRIMARY KEY,
    slot integer NOT NULL,
    rotated_at timestamptz NOT NULL DEFAULT now()
);

-- Per-queue control row: pausing, later per-queue overrides. Changed only by operators.
CREATE TABLE awa.queue_meta (
    queue text PRIMARY KEY,
    paused boolean NOT NULL DEFAULT false,
    paused_at timestamptz,
    paused_by text,
    -- AWA["QUEUES"][queue]["dlq"], published by the workers serving the queue (see awa.dlq
    -- routing in close_attempts): terminal failures of this queue go to awa.dlq_entries.
    dlq_enabled boolean NOT NULL DEFAULT false,
    -- How many lanes per (queue, priority) producers spread a queue's immediate jobs over.
    -- Changed only by operators (awa_shards); 1 keeps the queue strictly FIFO per priority.
    enqueue_shards smallint NOT NULL DEFAULT 1 CHECK (enqueue_shards BETWEEN 1 AND 64)
);

-- A lane is one ordered (queue, priority, shard) stream. The row is inserted once, on first use
-- (awa.create_lane, together with the lane's commit sequence), and is never updated or locked.
CREATE TABLE awa.queue_lanes (
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority, shard)
);
