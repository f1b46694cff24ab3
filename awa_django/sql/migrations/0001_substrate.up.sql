-- awa substrate, version 1: schema, rings, backlog, control plane and the storage functions
-- the hot path calls. See docs/architecture.md for how the pieces fit.
--
-- Hot-path rule (DESIGN.md §3 property 1): enqueue, claim and completion only INSERT into the
-- ring-partitioned tables below, advance sequences and take row/advisory locks. Old history is
-- reclaimed by truncating whole ring partitions, never by UPDATE or DELETE of single rows.

CREATE SCHEMA awa;

-- Job ids stay the same for the whole life of a job, across retries and promotions.
CREATE SEQUENCE awa.job_id_seq AS bigint;

-- Numbers the ready rows of a lane in the order their producer wrote them. Only the order within
-- one producer transaction matters: across transactions a lane is ordered by the commit
-- positions of awa.lane_commits. So each backend may take its numbers from a cached range.
CREATE SEQUENCE awa.lane_seq AS bigint CACHE 64;

-- ---------------------------------------------------------------------------------------------
-- Control plane
-- ---------------------------------------------------------------------------------------------

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
    dlq_enabled boolean NOT NULL DEFAULT false
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

-- ---------------------------------------------------------------------------------------------
-- Queue plane: ring partitioned by ready_slot
-- ---------------------------------------------------------------------------------------------

-- Immutable runnable rows. Enqueue and promotion append; nothing updates or deletes a row. A
-- row becomes claimable through the awa.lane_commits row its transaction appends when it
-- commits. The primary key leads with the lane so a claim reads a commit's rows by index in
-- every partition (there is no skip scan over a leading slot column).
CREATE TABLE awa.ready_entries (
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    lane_seq bigint NOT NULL,
    ready_slot integer NOT NULL,
    ready_generation bigint NOT NULL,
    job_id bigint NOT NULL,
    kind text NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    run_lease bigint NOT NULL,
    max_attempts integer NOT NULL,
    run_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    -- The writing transaction: its commit publishes the row through awa.lane_commits.
    batch xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- Set on the first row of each write (one enqueue, one COPY, one promoted lane): only those
    -- rows queue the commit-time trigger (awa.publish_ready), so a COPY of thousands of rows
    -- costs one trigger call, not one per row.
    announce boolean NOT NULL DEFAULT false,
    PRIMARY KEY (queue, priority, shard, lane_seq, ready_slot)
) PARTITION BY LIST (ready_slot);
CREATE INDEX ready_entries_job_id ON awa.ready_entries (job_id);

-- The order of a lane: one row per producer transaction and lane, appended by the transaction
-- itself as it commits (the deferred trigger awa.publish_ready). commit_seq is drawn from the
-- lane's own sequence at that moment, so positions follow commit order and a lane's rows are
-- dense (1, 2, 3, ...) but for positions whose producer failed at commit; the row stands for
-- that transaction's ready rows of the lane, lane_seq first_seq .. last_seq of batch. It lives
-- in the slot of its rows, so prune reclaims both together.
CREATE TABLE awa.lane_commits (
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    commit_seq bigint NOT NULL,
    ready_slot integer NOT NULL,
    batch xid8 NOT NULL,
    first_seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (queue, priority, shard, commit_seq, ready_slot)
) PARTITION BY LIST (ready_slot);

-- Marks an unclaimed ready row as no longer claimable (cancel before claim, moves) without
-- touching the immutable row. Claim anti-joins it.
CREATE TABLE awa.ready_tombstones (
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    lane_seq bigint NOT NULL,
    ready_slot integer NOT NULL,
    job_id bigint NOT NULL,
    reason text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority, shard, lane_seq, ready_slot)
) PARTITION BY LIST (ready_slot);

-- Claim receipts: one per claimed ready row, in the same slot as that row, so truncating a slot
-- reclaims ready rows and their receipts together. The newest receipt of a lane, by commit_seq
-- (the row's awa.lane_commits position) and then lane_seq, is the lane's claim cursor; the
-- primary key makes claiming one ready row twice impossible. Lookups by attempt go through
-- the job_id index.
CREATE TABLE awa.claim_receipts (
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    commit_seq bigint NOT NULL,
    lane_seq bigint NOT NULL,
    ready_slot integer NOT NULL,
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    attempt integer NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    claimed_by text NOT NULL,
    -- Hard deadline of the attempt (the queue's deadline after the claim); NULL disables it.
    deadline_at timestamptz,
    PRIMARY KEY (queue, priority, shard, commit_seq, lane_seq, ready_slot)
) PARTITION BY LIST (ready_slot);
-- Job lookups (the awa.jobs view, operators) by id.
CREATE INDEX claim_receipts_job_id ON awa.claim_receipts (job_id);
-- Rescue windows (awa.find_rescuable). Receipts are appended in claim order, so each block range
-- spans a short stretch of claim times (and of deadlines, give or take the spread of the
-- queues' deadline_s), and BRIN costs a claim almost nothing where a B-tree would add an index
-- insert per receipt. autosummarize: a filled range is summarized by autovacuum soon after,
-- instead of at the next vacuum of the table; the unsummarized tail is read whole.
CREATE INDEX claim_receipts_claimed_at ON awa.claim_receipts USING brin (claimed_at)
    WITH (autosummarize = on);
CREATE INDEX claim_receipts_deadline_at ON awa.claim_receipts USING brin (deadline_at)
    WITH (autosummarize = on);

-- Closure evidence: one row per closed attempt, whatever its outcome. The primary key on
-- (job_id, run_lease) is the run_lease guard: the first closer of an attempt wins, a later or
-- stale write for the same attempt conflicts and changes nothing. Terminal outcomes
-- (completed, failed, cancelled) are the job's terminal fact; body columns stay in the retained
-- ready row of the same slot. ``result`` is a completed attempt's JSON return value, written only
-- for handlers that ask to keep one (django.tasks results); NULL otherwise.
CREATE TABLE awa.done_entries (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    ready_slot integer NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    lane_seq bigint NOT NULL,
    attempt integer NOT NULL,
    outcome text NOT NULL
        CHECK (outcome IN ('completed', 'failed', 'cancelled', 'retryable', 'snoozed')),
    error jsonb,
    finalized_at timestamptz NOT NULL DEFAULT now(),
    result jsonb,
    PRIMARY KEY (job_id, run_lease, ready_slot)
) PARTITION BY LIST (ready_slot);

-- One child per slot for every queue-ring table. The names are built from integers only.
-- Four slots: the hot statements carry no slot predicate, so each execution locks and sets up
-- every partition it names. Under traffic the ring fills within a few rotations whatever its
-- size and then waits for its oldest slot to be pruned, so more slots do not reclaim sooner;
-- they only cost per statement. A 40,000-job no-op drain (concurrency 128, durable server)
-- used 25-35% less server CPU with 4 slots than with 16, and ran 13-20% faster.
DO $$
DECLARE
    v_slots constant integer := 4;
    v_table text;
BEGIN
    INSERT INTO awa.ring_config (ring, slot_count) VALUES ('queue', v_slots);
    FOREACH v_table IN ARRAY ARRAY['ready_entries', 'lane_commits', 'ready_tombstones',
                                   'claim_receipts', 'done_entries'] LOOP
        FOR v_slot IN 0 .. v_slots - 1 LOOP
            EXECUTE format('CREATE TABLE awa.%I PARTITION OF awa.%I FOR VALUES IN (%s)',
                           v_table || '_' || v_slot, v_table, v_slot);
        END LOOP;
    END LOOP;
END
$$;

-- Genesis cursor: generation 0 on slot 0.
INSERT INTO awa.queue_ring_rotations (generation, slot) VALUES (0, 0);

-- ---------------------------------------------------------------------------------------------
-- Materialized execution: the lease ring and attempt state
-- ---------------------------------------------------------------------------------------------

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

-- ---------------------------------------------------------------------------------------------
-- Backlog and hold tables (plain)
-- ---------------------------------------------------------------------------------------------

-- Scheduled (future run_at, snoozed) and retryable jobs, kept out of the claim path until
-- promotion moves them into the ready ring.
CREATE TABLE awa.deferred_jobs (
    job_id bigint PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('scheduled', 'retryable')),
    kind text NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    run_lease bigint NOT NULL,
    max_attempts integer NOT NULL,
    run_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    deferred_at timestamptz NOT NULL DEFAULT now()
);
-- Partial indexes per literal state: promotion queries name the state literally so these are
-- chosen even with a large backlog.
CREATE INDEX deferred_jobs_scheduled_due ON awa.deferred_jobs (run_at, job_id)
    WHERE state = 'scheduled';
CREATE INDEX deferred_jobs_retryable_due ON awa.deferred_jobs (run_at, job_id)
    WHERE state = 'retryable';

-- Operator hold for terminal failures on DLQ-enabled queues.
CREATE TABLE awa.dlq_entries (
    job_id bigint PRIMARY KEY,
    kind text NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    original_run_lease bigint NOT NULL,
    max_attempts integer NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    dlq_reason text NOT NULL,
    dlq_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dlq_entries_queue_dlq_at ON awa.dlq_entries (queue, dlq_at DESC);

-- Failed and cancelled jobs whose ring slot was pruned while they were still inside
-- FAILED_RETENTION_S: one hydrated row per job, deleted by the leader's retention cleanup.
-- Failures are rare next to completions, so a plain table with row deletes stays small.
CREATE TABLE awa.terminal_history (
    job_id bigint PRIMARY KEY,
    run_lease bigint NOT NULL,
    state text NOT NULL CHECK (state IN ('failed', 'cancelled')),
    kind text NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    run_at timestamptz,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    progress jsonb,
    checkpoint jsonb,
    finalized_at timestamptz NOT NULL
);
CREATE INDEX terminal_history_finalized_at ON awa.terminal_history (finalized_at);

-- ---------------------------------------------------------------------------------------------
-- Storage functions
-- ---------------------------------------------------------------------------------------------

-- Row type a claim returns to the worker.
CREATE TYPE awa.claimed_job AS (
    queue text,
    priority smallint,
    shard smallint,
    lane_seq bigint,
    ready_slot integer,
    job_id bigint,
    kind text,
    args jsonb,
    attempt integer,
    run_lease bigint,
    max_attempts integer,
    run_at timestamptz,
    created_at timestamptz,
    metadata jsonb,
    tags text[],
    errors jsonb,
    progress jsonb,
    checkpoint jsonb
);

-- The object key of a lane's advisory locks. Producers take it in class 1096237388 ('AWAL')
-- while they publish (shared: producers never wait for each other), claimers (and cancel_job)
-- in class 1096237379 ('AWAC'), and neither collides with an application's keys. Two lanes
-- whose names hash alike merely share their locks.
-- The explicit ::text casts keep the body immutable (text || smallint is only stable), so the
-- planner inlines it; a call it cannot inline re-parses and re-plans the body in every
-- transaction.
CREATE FUNCTION awa.lane_lock_key(p_queue text, p_priority smallint, p_shard smallint)
RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtext(p_queue || '/' || p_priority::text || '/' || p_shard::text)
$$;

-- The name of a lane's commit sequence: derived from the lane, so producers find it in the
-- catalog (whose lookups see every committed object, whatever the caller's isolation level)
-- without reading a table row their snapshot might not show yet.
CREATE FUNCTION awa.lane_sequence_name(p_queue text, p_priority smallint, p_shard smallint)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'lane_' || md5(p_queue || '/' || p_priority::text || '/' || p_shard::text)
$$;

-- Creates a lane on first use: its queue_lanes row and its commit sequence, and returns the
-- sequence. Creators serialise on a lock of queue_lanes that only they take (claimers read the
-- table and do not conflict), so concurrent first uses of one lane wait for each other instead
-- of failing; taking the lock also makes the catalog lookup after it see a creator that
-- committed meanwhile. SECURITY DEFINER: producers need no CREATE privilege on the schema; the
-- sequence is usable by whoever may use the schema.
CREATE FUNCTION awa.create_lane(p_queue text, p_priority smallint, p_shard smallint)
RETURNS regclass LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_name constant text := awa.lane_sequence_name(p_queue, p_priority, p_shard);
    v_sequence regclass;
BEGIN
    LOCK TABLE awa.queue_lanes IN SHARE ROW EXCLUSIVE MODE;
    v_sequence := to_regclass(format('awa.%I', v_name));
    IF v_sequence IS NULL THEN
        -- CACHE 1: positions must be handed out in the order producers ask for them.
        EXECUTE format('CREATE SEQUENCE awa.%I AS bigint CACHE 1', v_name);
        EXECUTE format('GRANT USAGE, SELECT, UPDATE ON SEQUENCE awa.%I TO PUBLIC', v_name);
        INSERT INTO awa.queue_lanes (queue, priority, shard) VALUES (p_queue, p_priority, p_shard)
            ON CONFLICT DO NOTHING;
        v_sequence := to_regclass(format('awa.%I', v_name));
    END IF;
    RETURN v_sequence;
END
$$;

-- Drops every lane's commit sequence (awa.reset_all in tests and benchmarks, the down
-- migration). The caller removes the queue_lanes rows, so the next use recreates each lane.
CREATE FUNCTION awa.drop_lane_sequences() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_sequence text;
BEGIN
    FOR v_sequence IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'awa' AND c.relkind = 'S' AND c.relname ~ '^lane_[0-9a-f]{32}$'
    LOOP
        EXECUTE format('DROP SEQUENCE awa.%I', v_sequence);
    END LOOP;
END
$$;

-- The ring slot (and its generation) the current transaction writes its ready rows to: read from
-- the ring cursor by the transaction's first write and kept for the rest of it, so all of a
-- transaction's rows of a lane, and the awa.lane_commits row that publishes them, share one
-- slot and are pruned together.
CREATE FUNCTION awa.producer_slot(OUT slot integer, OUT generation bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_pinned constant text := current_setting('awa.producer_slot', true);
BEGIN
    IF v_pinned IS NOT NULL AND v_pinned <> '' THEN
        slot := split_part(v_pinned, ':', 1)::integer;
        generation := split_part(v_pinned, ':', 2)::bigint;
        RETURN;
    END IF;
    SELECT r.slot, r.generation INTO slot, generation
      FROM awa.queue_ring_rotations r ORDER BY r.generation DESC LIMIT 1;
    PERFORM set_config('awa.producer_slot', slot || ':' || generation, true);
END
$$;

-- Commit-time trigger of ready_entries, queued by the first row of every write (announce) and
-- fired after the application's last statement, as its transaction commits (or at SET
-- CONSTRAINTS ... IMMEDIATE). The first firing for a lane publishes all of the transaction's
-- rows of that lane written so far: it appends the lane_commits row that makes them claimable,
-- at the lane's next commit position. awa.published (local to the transaction, so it also rolls
-- back with a savepoint) remembers up to which lane_seq each lane is published, so later
-- firings for the same rows do nothing and rows written after an early publication get a
-- position of their own.
--
-- The position is held only from here until the commit record is durable, never while the
-- application's transaction does its other work. The shared lane lock marks it as in flight: a
-- claimer that finds a position missing takes the lock exclusively to learn that no producer of
-- the lane is mid-commit (so the position belongs to a producer that failed and can be stepped
-- over). Producers share it, so they never wait for each other, whatever order they publish
-- lanes in.
--
-- Wake-ups: a worker with nothing to do on a queue holds that queue's wake lock (class
-- 1096237385, 'AWAI'; see worker/wake.py) exclusively, and only then does a commit NOTIFY:
-- PostgreSQL serialises every committing transaction that notifies on one lock held through its
-- commit, which would make busy producers take turns again. A producer that finds no worker
-- waiting holds the lock shared until it has committed, so a worker that is about to wait
-- cannot miss it: it gets the lock only after the commit and claims once more before it waits.
--
-- An error here aborts the commit: it is raised again naming the job and queue, with the
-- original SQLSTATE, so the caller's atomic() block fails with a clear message and its rows
-- roll back with the jobs.
CREATE FUNCTION awa.publish_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- The lane's commit sequence, and its key in awa.published.
    v_lane constant text := awa.lane_sequence_name(NEW.queue, NEW.priority, NEW.shard);
    v_published constant text := coalesce(current_setting('awa.published', true), '');
    v_at constant integer := position(';' || v_lane || '=' IN v_published);
    v_entry text;
    v_last_seq bigint;
BEGIN
    IF v_at > 0 THEN
        v_entry := split_part(substr(v_published, v_at + 1), ';', 1);
        IF NEW.lane_seq <= split_part(v_entry, '=', 2)::bigint THEN
            RETURN NULL;
        END IF;
    END IF;
    -- Every row this transaction wrote took its lane_seq from this session before now.
    v_last_seq := currval('awa.lane_seq');
    BEGIN
        -- The lock before the position: a drawn position is always covered by it.
        PERFORM pg_advisory_xact_lock_shared(
            1096237388, awa.lane_lock_key(NEW.queue, NEW.priority, NEW.shard));
        INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                      first_seq, last_seq)
        VALUES (NEW.queue, NEW.priority, NEW.shard,
                nextval(coalesce(to_regclass('awa.' || v_lane),
                                 awa.create_lane(NEW.queue, NEW.priority, NEW.shard))),
                NEW.ready_slot, NEW.batch, NEW.lane_seq, v_last_seq);
        IF NOT pg_try_advisory_xact_lock_shared(1096237385, hashtext(NEW.queue)) THEN
            PERFORM pg_notify('awa', NEW.queue);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'awa: could not publish job % of queue % at commit: %', NEW.job_id,
                        NEW.queue, SQLERRM
              USING ERRCODE = SQLSTATE;
    END;
    PERFORM set_config('awa.published',
                       CASE WHEN v_at > 0
                            THEN replace(v_published, ';' || v_entry,
                                         ';' || v_lane || '=' || v_last_seq)
                            ELSE v_published || ';' || v_lane || '=' || v_last_seq END,
                       true);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER ready_entries_publish AFTER INSERT ON awa.ready_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.announce)
    EXECUTE FUNCTION awa.publish_ready();

-- Enqueues one job inside the caller's transaction and returns its id. A future run_at goes to
-- the deferred backlog; anything else is appended to its lane as an immutable ready row, which
-- the transaction publishes when it commits (awa.publish_ready). Nothing here waits for, or
-- locks against, another producer.
CREATE FUNCTION awa.enqueue_job(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint := nextval('awa.job_id_seq');
    v_slot record;
BEGIN
    IF p_run_at IS NOT NULL AND p_run_at > now() THEN
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        VALUES (v_job_id, 'scheduled', p_kind, p_queue, p_priority, p_args, 0, 0, p_max_attempts,
                p_run_at, now(), p_metadata, p_tags, '[]');
        RETURN v_job_id;
    END IF;
    v_slot := awa.producer_slot();
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key'),
            nextval('awa.lane_seq'), v_slot.slot, v_slot.generation, v_job_id, p_kind, p_args, 0,
            0, p_max_attempts, coalesce(p_run_at, now()), now(), p_metadata, p_tags, '[]', true);
    RETURN v_job_id;
END
$$;

-- Claims up to p_limit ready jobs of one queue, lane by lane in effective priority order.
--
-- A claimer tries the lane's claim lock (one claimer per lane at a time; others move on), then
-- derives the lane's cursor from its newest receipt, (commit_seq, lane_seq), and takes the next
-- rows in lane order: the rest of the cursor's commit, then the commits after it, each commit's
-- rows in lane_seq order. The cursor read is a separate statement after the lock, so it sees
-- the receipts of the claimer that held the lane before us. Receipts are appended in the same
-- transaction: a claim that rolls back leaves the cursor where it was. Nothing is updated.
--
-- Commit positions are dense, so a claimer takes commits only while they follow each other
-- without a hole: a missing position belongs to a producer that is committing right now, whose
-- rows must come first, or to one that failed at commit. When the next commit after the cursor
-- is not the next position, the claimer tries the lane's producer lock exclusively: it gets it
-- only when no producer of the lane is mid-commit, so every missing position is dead and the
-- lane is taken as it stands (holding the lock to the end of the claim, which keeps the lane's
-- producers out for that long). Otherwise it takes only the rest of the cursor's commit and
-- comes back later.
--
-- Lanes are visited in the order awa.claim_order gives (priority aging: p_aging_s > 0 lets a
-- waiting row gain one priority step per p_aging_s seconds). A lane yields only the prefix of
-- rows whose effective priority does not exceed the next lane's head (its bound), so a batch
-- never takes fresh low-priority rows behind an aged head ahead of more urgent work; when a
-- lane was cut short that way, another round serves the lanes again in the new order.
--
-- p_sequential runs each lane one job at a time across the fleet: a lane whose newest claim is
-- still open is skipped, and a lane yields one row per claim. Jobs sharing an ordering key
-- (one lane) then run strictly one after another, in enqueue order.
--
-- p_deadline_s > 0 gives each attempt a hard deadline; progress and checkpoint saved by earlier
-- attempts of the job come back with it.
--
-- Plans: one generic plan per session, with seq scans off. Re-planning per call costs more
-- than running the claim (each statement plans over every partition of several rings), and a
-- generic plan made while a partition was nearly empty would otherwise seq-scan it long after
-- it has grown; index probes on empty partitions cost microseconds.
CREATE FUNCTION awa.claim_ready(p_queue text, p_limit integer, p_claimed_by text,
                                p_deadline_s double precision, p_aging_s double precision,
                                p_sequential boolean)
RETURNS SETOF awa.claimed_job LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
    v_lane record;
    v_at record;
    v_commit bigint;
    v_expect bigint;
    v_settled boolean;
    v_remaining integer := p_limit;
    v_claimed integer;
    v_round_claimed integer;
    v_again boolean := true;
BEGIN
    IF EXISTS (SELECT 1 FROM awa.queue_meta m WHERE m.queue = p_queue AND m.paused) THEN
        RETURN;
    END IF;
    WHILE v_again AND v_remaining > 0 LOOP
        v_again := false;
        v_round_claimed := 0;
        FOR v_lane IN SELECT * FROM awa.claim_order(p_queue, p_aging_s) LOOP
            -- An advisory lock, not a row lock on queue_lanes: a row lock would give even an
            -- empty claim a transaction id and a WAL record, so every idle poll would wait for
            -- a WAL flush on a durable server. Locks taken in an earlier round are ours already.
            CONTINUE WHEN NOT pg_try_advisory_xact_lock(
                1096237379, awa.lane_lock_key(p_queue, v_lane.priority, v_lane.shard));
            -- The cursor, the commit it is in (in the receipt's slot: a commit shares the slot
            -- of its rows) and the next published position after it.
            SELECT c.commit_seq, c.lane_seq, c.job_id, c.run_lease, c.ready_slot, m.batch,
                   m.last_seq,
                   (SELECT n.commit_seq FROM awa.lane_commits n
                     WHERE n.queue = p_queue AND n.priority = v_lane.priority
                       AND n.shard = v_lane.shard AND n.commit_seq > coalesce(c.commit_seq, 0)
                     ORDER BY n.commit_seq LIMIT 1) AS next_commit
              INTO v_at
              FROM (SELECT 1) AS one
              LEFT JOIN LATERAL (
                  SELECT c.commit_seq, c.lane_seq, c.job_id, c.run_lease, c.ready_slot
                    FROM awa.claim_receipts c
                   WHERE c.queue = p_queue AND c.priority = v_lane.priority
                     AND c.shard = v_lane.shard
                   ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
              LEFT JOIN LATERAL (
                  SELECT m.batch, m.last_seq FROM awa.lane_commits m
                   WHERE m.queue = p_queue AND m.priority = v_lane.priority
                     AND m.shard = v_lane.shard AND m.commit_seq = c.commit_seq
                     AND m.ready_slot = c.ready_slot
                   LIMIT 1) m ON true;
            -- Nothing published after the cursor and nothing left in its commit: the lane is
            -- drained, and an empty claim reads no further.
            CONTINUE WHEN v_at.next_commit IS NULL
                      AND (v_at.batch IS NULL OR v_at.lane_seq >= v_at.last_seq);
            v_commit := coalesce(v_at.commit_seq, 0);
            -- Inside an IF, not folded into a CONTINUE condition: an expression's plan is set
            -- up whole even when AND short-circuits, which locked every partition of two more
            -- ring tables on every claim of every queue.
            IF p_sequential AND v_at.job_id IS NOT NULL THEN
                CONTINUE WHEN NOT EXISTS (
                    SELECT 1 FROM awa.done_entries d
                     WHERE d.job_id = v_at.job_id AND d.run_lease = v_at.run_lease
                       AND d.ready_slot = v_at.ready_slot);
            END IF;
            v_settled := false;
            IF v_at.next_commit > v_commit + 1 THEN
                v_settled := pg_try_advisory_xact_lock(
                    1096237388, awa.lane_lock_key(p_queue, v_lane.priority, v_lane.shard));
            END IF;
            -- Commits are numbered from the cursor's own (when it still holds rows to claim) or
            -- from the one after it; those whose position is that number plus their rank have
            -- no hole before them.
            v_expect := v_commit - CASE WHEN v_at.batch IS NULL THEN 0 ELSE 1 END;
            RETURN QUERY
            WITH usable AS (
                SELECT u.commit_seq, u.ready_slot, u.batch, u.first_seq, u.last_seq FROM (
                    SELECT n.commit_seq, n.ready_slot, n.batch,
                           CASE WHEN n.commit_seq = v_commit THEN v_at.lane_seq + 1
                                ELSE n.first_seq END AS first_seq,
                           n.last_seq,
                           n.commit_seq - row_number() OVER (ORDER BY n.commit_seq) AS behind
                      FROM awa.lane_commits n
                     WHERE n.queue = p_queue AND n.priority = v_lane.priority
                       AND n.shard = v_lane.shard AND n.commit_seq >= v_commit
                     ORDER BY n.commit_seq
                     LIMIT v_remaining + 1) u
                 WHERE v_settled OR u.behind = v_expect
            ), candidates AS (
                SELECT u.commit_seq, r.*,
                       awa.effective_priority(r.priority, r.run_at, p_aging_s) AS effective
                  FROM usable u
                  CROSS JOIN LATERAL (
                      -- A commit's rows are in its own slot: stated, it prunes the other
                      -- slots' partitions of both tables from each commit's probe.
                      SELECT r.* FROM awa.ready_entries r
                       WHERE r.queue = p_queue AND r.priority = v_lane.priority
                         AND r.shard = v_lane.shard AND r.ready_slot = u.ready_slot
                         AND r.lane_seq BETWEEN u.first_seq AND u.last_seq AND r.batch = u.batch
                         AND NOT EXISTS (
                             -- The commit's range is implied, but stated it bounds the index
                             -- scan of a merge anti-join, which otherwise reads every tombstone
                             -- of the lane.
                             SELECT 1 FROM awa.ready_tombstones t
                              WHERE t.queue = r.queue AND t.priority = r.priority
                                AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                                AND t.ready_slot = u.ready_slot
                                AND t.lane_seq BETWEEN u.first_seq AND u.last_seq)
                       ORDER BY r.lane_seq
                       LIMIT v_remaining) r
                 ORDER BY u.commit_seq, r.lane_seq
                 LIMIT CASE WHEN p_sequential THEN 1 ELSE v_remaining END
            ), picked AS (
                -- The lane's FIFO prefix within the bound: the first row past it ends the take.
                SELECT * FROM (
                    SELECT c.*, bool_and(c.effective <= v_lane.bound)
                                    OVER (ORDER BY c.commit_seq, c.lane_seq) AS within_bound
                      FROM candidates c) b
                 WHERE b.within_bound
            ), receipts AS (
                INSERT INTO awa.claim_receipts (queue, priority, shard, commit_seq, lane_seq,
                                                ready_slot, job_id, run_lease, attempt,
                                                claimed_by, deadline_at)
                SELECT p.queue, p.priority, p.shard, p.commit_seq, p.lane_seq, p.ready_slot,
                       p.job_id, p.run_lease + 1, p.attempt + 1, p_claimed_by,
                       CASE WHEN p_deadline_s > 0
                            THEN now() + make_interval(secs => p_deadline_s) END
                  FROM picked p
            )
            SELECT p.queue, p.priority, p.shard, p.lane_seq, p.ready_slot, p.job_id, p.kind,
                   p.args, p.attempt + 1, p.run_lease + 1, p.max_attempts, p.run_at,
                   p.created_at, p.metadata, p.tags, p.errors, s.progress, s.checkpoint
              FROM picked p
              -- A probe per claimed row (see awa.close_attempts on LATERAL ... LIMIT 1).
              LEFT JOIN LATERAL (
                  SELECT s.progress, s.checkpoint FROM awa.attempt_state s
                   WHERE s.job_id = p.job_id LIMIT 1) s ON true
             ORDER BY p.commit_seq, p.lane_seq;
            GET DIAGNOSTICS v_claimed = ROW_COUNT;
            -- Only a bound below the lane's own priority can cut it short of v_remaining.
            v_again := v_again OR (v_claimed < v_remaining AND v_lane.bound < v_lane.priority);
            v_remaining := v_remaining - v_claimed;
            v_round_claimed := v_round_claimed + v_claimed;
            EXIT WHEN v_remaining <= 0;
        END LOOP;
        EXIT WHEN v_round_claimed = 0;
    END LOOP;
END
$$;

-- Closes a batch of attempts in one statement and returns the attempts it actually closed.
--
-- Guard (DESIGN.md §3 property 2): an item must match an existing receipt on
-- (job_id, run_lease), and the done_entries primary key lets only the first closer of an attempt
-- win. A completion for an older lease, or for an attempt already closed by rescue or cancel,
-- inserts nothing and is missing from the result: the caller reports it as stale.
-- Retryable and snoozed outcomes append the job to the deferred backlog in the same statement,
-- carrying its body from the retained ready row. A retry appends this attempt's error to the
-- job's error list; a snooze gives the attempt back. A closed attempt's lease (if it had one)
-- is deleted; its progress and checkpoint are saved for the next attempt, or deleted when the
-- job completed.
--
-- p_batch is a JSON array with one object per attempt: its receipt address (ready_slot, queue,
-- priority, shard, lane_seq, job_id, run_lease), outcome, run_at (retryable and snoozed only),
-- error, progress and checkpoint (objects, or null when the attempt reported none) and result
-- (a completed attempt's return value as JSON text, or null). One JSON document rather than
-- one array per field: the worker serializes it in one C call, where dumping thirteen arrays
-- element by element cost it about 6 µs per completion.
-- Plans: as awa.claim_ready's, for the same reasons. Every ring row is read through a LATERAL
-- ... LIMIT 1 probe of its primary key, one per batch item: as a plain join, a generic plan
-- made while the ring was small hashed the batch against every retained receipt, so each
-- close cost more the longer the ring had run (1.8 ms for 100 completions at 2,000 retained
-- receipts, 4.4 ms at 18,000).
CREATE FUNCTION awa.close_attempts(p_batch json)
RETURNS TABLE (job_id bigint, run_lease bigint) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH batch AS (
        SELECT b.ready_slot, b.queue, b.priority, b.shard, b.lane_seq, b.job_id, b.run_lease,
               b.outcome, b.run_at, b.error, b.progress, b.checkpoint, b.result::jsonb AS result
          FROM json_to_recordset(p_batch)
            AS b(ready_slot integer, queue text, priority smallint, shard smallint,
                 lane_seq bigint, job_id bigint, run_lease bigint, outcome text,
                 run_at timestamptz, error jsonb, progress jsonb, checkpoint jsonb, result text)
    ), live AS (
        -- The receipt by attempt, through the job_id index (its lane columns come from it).
        SELECT b.ready_slot, c.queue, c.priority, c.shard, c.lane_seq, b.job_id, b.run_lease,
               b.outcome, b.run_at, b.error, b.progress, b.checkpoint, b.result, c.attempt
          FROM batch b
          CROSS JOIN LATERAL (
              SELECT c.queue, c.priority, c.shard, c.lane_seq, c.attempt
                FROM awa.claim_receipts c
               WHERE c.job_id = b.job_id AND c.run_lease = b.run_lease
                 AND c.ready_slot = b.ready_slot
               LIMIT 1) c
    ), closed AS (
        INSERT INTO awa.done_entries (job_id, run_lease, ready_slot, queue, priority, shard,
                                      lane_seq, attempt, outcome, error, result)
        SELECT l.job_id, l.run_lease, l.ready_slot, l.queue, l.priority, l.shard, l.lane_seq,
               l.attempt, l.outcome, l.error, l.result
          FROM live l
        ON CONFLICT DO NOTHING
        RETURNING done_entries.job_id, done_entries.run_lease, done_entries.ready_slot,
                  done_entries.queue, done_entries.priority, done_entries.shard,
                  done_entries.lane_seq, done_entries.attempt, done_entries.outcome
    ), requeued AS (
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        SELECT r.job_id,
               CASE c.outcome WHEN 'retryable' THEN 'retryable' ELSE 'scheduled' END,
               r.kind, r.queue, r.priority, r.args,
               CASE c.outcome WHEN 'snoozed' THEN c.attempt - 1 ELSE c.attempt END,
               c.run_lease, r.max_attempts, l.run_at, r.created_at, r.metadata, r.tags,
               CASE c.outcome WHEN 'retryable' THEN r.errors || jsonb_build_array(l.error)
                              ELSE r.errors END
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
          CROSS JOIN LATERAL (
              SELECT r.* FROM awa.ready_entries r
               WHERE r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
                 AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
               LIMIT 1) r
         WHERE c.outcome IN ('retryable', 'snoozed')
    ), dead AS (
        -- Terminal failures of DLQ-enabled queues are parked for an operator. Every closer
        -- (worker, rescue, cancel, callback timeout) goes through here, so all of them route.
        INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,
                                     original_run_lease, max_attempts, created_at, metadata,
                                     tags, errors, dlq_reason)
        SELECT r.job_id, r.kind, r.queue, r.priority, r.args, c.attempt, c.run_lease,
               r.max_attempts, r.created_at, r.metadata, r.tags,
               CASE WHEN l.error IS NULL THEN r.errors ELSE r.errors || jsonb_build_array(l.error)
               END,
               CASE WHEN c.attempt >= r.max_attempts THEN 'attempts_exhausted'
                    ELSE 'terminal_error' END
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
          CROSS JOIN LATERAL (
              SELECT r.* FROM awa.ready_entries r
               WHERE r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
                 AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
               LIMIT 1) r
          JOIN awa.queue_meta m ON m.queue = c.queue AND m.dlq_enabled
         WHERE c.outcome = 'failed'
        ON CONFLICT (job_id) DO NOTHING
    ), released AS (
        DELETE FROM awa.leases x USING closed c
         WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
    ), forgotten AS (
        DELETE FROM awa.attempt_state s USING closed c
         WHERE s.job_id = c.job_id AND c.outcome = 'completed'
    ), saved AS (
        INSERT INTO awa.attempt_state (job_id, run_lease, progress, checkpoint)
        SELECT c.job_id, c.run_lease, l.progress, l.checkpoint
          FROM closed c
          JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease
         WHERE c.outcome <> 'completed' AND (l.progress IS NOT NULL OR l.checkpoint IS NOT NULL)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = excluded.run_lease,
               progress = coalesce(excluded.progress, awa.attempt_state.progress),
               checkpoint = coalesce(excluded.checkpoint, awa.attempt_state.checkpoint),
               updated_at = now()
         WHERE awa.attempt_state.run_lease <= excluded.run_lease
    )
    SELECT c.job_id, c.run_lease FROM closed c;
END
$$;

-- Keeps a batch of one worker's live attempts alive and saves their reported progress, in one
-- statement; returns the attempts that are still open. An attempt missing from the result was
-- closed by someone else (rescue, cancel): the worker raises its cancel flag.
-- The first heartbeat of an attempt materializes its lease in the current lease slot; later
-- ones update heartbeat_at. Progress is saved only for attempts whose lease is current.
CREATE FUNCTION awa.heartbeat_attempts(
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

-- Moves due deferred jobs of one state into the ready ring, at most p_limit per call, and
-- returns how many moved. Job id, attempt and run_lease are kept. Each lane's rows are written in
-- (run_at, job_id) order, the first one announcing them, so the promoting transaction publishes
-- them at the back of their lane when it commits, like any producer's.
--
-- Locks: deferred rows FOR UPDATE SKIP LOCKED, so concurrent promoters split the backlog;
-- nothing else is waited for (lanes take no lock until commit). The state is a parameter of
-- this function but a literal in each query below, so the partial indexes are chosen.
CREATE FUNCTION awa.promote_due(p_state text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
    v_seqs bigint[];
    v_slot record;
    v_moved integer;
BEGIN
    IF p_state = 'scheduled' THEN
        SELECT array_agg(d.job_id) INTO v_ids FROM (
            SELECT s.job_id FROM awa.deferred_jobs s
             WHERE s.state = 'scheduled' AND s.run_at <= now()
               AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m
                                WHERE m.queue = s.queue AND m.paused)
             ORDER BY s.run_at, s.job_id LIMIT p_limit FOR UPDATE SKIP LOCKED) d;
    ELSIF p_state = 'retryable' THEN
        SELECT array_agg(d.job_id) INTO v_ids FROM (
            SELECT s.job_id FROM awa.deferred_jobs s
             WHERE s.state = 'retryable' AND s.run_at <= now()
               AND NOT EXISTS (SELECT 1 FROM awa.queue_meta m
                                WHERE m.queue = s.queue AND m.paused)
             ORDER BY s.run_at, s.job_id LIMIT p_limit FOR UPDATE SKIP LOCKED) d;
    ELSE
        RAISE EXCEPTION 'unknown deferred state %', p_state;
    END IF;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    v_slot := awa.producer_slot();
    -- Increasing, and handed out in (lane, run_at, job_id) order below: each lane's rows are
    -- numbered by run_at, and its announcing row has the lowest number of them.
    v_seqs := ARRAY(SELECT nextval('awa.lane_seq') FROM generate_series(1, cardinality(v_ids)));
    WITH moved AS (
        DELETE FROM awa.deferred_jobs d WHERE d.job_id = ANY (v_ids)
        RETURNING d.*, awa.reentry_shard(d.queue, d.metadata) AS shard
    ), numbered AS (
        SELECT m.*,
               row_number() OVER (ORDER BY m.queue, m.priority, m.shard, m.run_at, m.job_id)
                   AS position,
               row_number() OVER (PARTITION BY m.queue, m.priority, m.shard
                                  ORDER BY m.run_at, m.job_id) = 1 AS announce
          FROM moved m
    )
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                   ready_generation, job_id, kind, args, attempt, run_lease,
                                   max_attempts, run_at, created_at, metadata, tags, errors,
                                   announce)
    SELECT n.queue, n.priority, n.shard, v_seqs[n.position], v_slot.slot, v_slot.generation,
           n.job_id, n.kind, n.args, n.attempt, n.run_lease, n.max_attempts, n.run_at,
           n.created_at, n.metadata, n.tags, n.errors, n.announce
      FROM numbered n;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END
$$;

-- Open attempts the leader must rescue: past their hard deadline, or silent for longer than the
-- staleness window (newest lease heartbeat, or the claim itself for an attempt that never
-- heartbeated). Read-only: the leader closes them through awa.close_attempts, whose guard makes
-- a race with the attempt's own completion resolve to exactly one closure. An attempt with a
-- registered, unresumed callback is judged by its callback timeout alone; a resumed one by the
-- fresh deadline its lease carries.
--
-- Bounded by a cursor the leader keeps between passes: retained receipts are almost all closed,
-- and anti-joining every one of them cost about 2.5 µs per receipt on every pass. Candidates
-- are the attempts holding a lease (heartbeating or waiting on a callback; few, whatever their
-- age) and the receipts that became due since the previous complete pass: claimed in
-- [p_claimed_after, now - staleness) or with a deadline in [p_deadline_after, now), found
-- through the BRIN indexes on claim_receipts. A lease-less receipt older than a complete pass's
-- staleness cutoff was stale at that pass, hence closed by it, so later passes need not look
-- at it again. NULL bounds scan everything, as a new leader's first pass does.
-- Plans: seq scans off, so the done anti-join probes the primary key per candidate instead of
-- sorting every retained closure.
CREATE FUNCTION awa.find_rescuable(p_staleness_s double precision, p_limit integer,
                                   p_claimed_after timestamptz, p_deadline_after timestamptz)
RETURNS TABLE (reason text, job awa.claimed_job) LANGUAGE sql STABLE
SET enable_seqscan = off AS $$
    WITH candidates AS (
        -- A probe per lease (see awa.close_attempts on LATERAL ... LIMIT 1): as a join, this
        -- could read every retained receipt once any lease exists.
        SELECT c.*
          FROM awa.leases x
          CROSS JOIN LATERAL (
              SELECT c.* FROM awa.claim_receipts c
               WHERE c.job_id = x.job_id AND c.run_lease = x.run_lease
                 AND c.ready_slot = x.ready_slot
               LIMIT 1) c
        UNION
        SELECT c.*
          FROM awa.claim_receipts c
         WHERE (c.claimed_at >= coalesce(p_claimed_after, '-infinity')
                AND c.claimed_at < now() - make_interval(secs => p_staleness_s))
            OR (c.deadline_at >= coalesce(p_deadline_after, '-infinity')
                AND c.deadline_at < now())
    ), open AS MATERIALIZED (
        -- Materialized: the few open candidates are joined to their bodies, not all of them.
        SELECT c.*
          FROM candidates c
         WHERE NOT EXISTS (SELECT 1 FROM awa.done_entries d
                            WHERE d.job_id = c.job_id AND d.run_lease = c.run_lease
                              AND d.ready_slot = c.ready_slot)
    )
    SELECT CASE WHEN l.callback_timeout_at IS NOT NULL THEN 'callback_timeout'
                WHEN coalesce(l.deadline_at, c.deadline_at) < now() THEN 'deadline'
                ELSE 'heartbeat' END,
           ROW(c.queue, c.priority, c.shard, c.lane_seq, c.ready_slot, c.job_id, r.kind, r.args,
               c.attempt, c.run_lease, r.max_attempts, r.run_at, r.created_at, r.metadata,
               r.tags, r.errors, NULL::jsonb, NULL::jsonb)::awa.claimed_job
      FROM open c
      JOIN awa.ready_entries r
        ON r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
       AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
      LEFT JOIN LATERAL (
          SELECT max(x.heartbeat_at) AS heartbeat_at, max(x.deadline_at) AS deadline_at,
                 max(x.callback_timeout_at) FILTER (WHERE x.callback_resumed_at IS NULL)
                     AS callback_timeout_at
            FROM awa.leases x WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease) l ON true
     WHERE CASE WHEN l.callback_timeout_at IS NOT NULL THEN l.callback_timeout_at < now()
                ELSE coalesce(l.deadline_at, c.deadline_at) < now()
                  OR coalesce(l.heartbeat_at, c.claimed_at)
                         < now() - make_interval(secs => p_staleness_s) END
     LIMIT p_limit
$$;

-- True when any queue-ring table holds a row in slot p_slot.
CREATE FUNCTION awa.queue_slot_has_rows(p_slot integer) RETURNS boolean
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
CREATE FUNCTION awa.rotate_queue_ring(p_keep integer) RETURNS text LANGUAGE plpgsql AS $$
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
CREATE FUNCTION awa.queue_slot_blocker(p_slot integer, p_completed_retention_s double precision)
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
CREATE FUNCTION awa.prune_queue_ring(
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

    EXECUTE format('TRUNCATE awa.%I, awa.%I, awa.%I, awa.%I, awa.%I',
                   'ready_entries_' || v_slot, 'lane_commits_' || v_slot,
                   'claim_receipts_' || v_slot, 'done_entries_' || v_slot,
                   'ready_tombstones_' || v_slot);
    RETURN 'pruned';
END
$$;

-- The lease ring: rotate when the incoming slot is empty, prune (truncate) the oldest non-current
-- slot once every lease in it has been deleted. Both only under the lease-ring lock (objid 2).
CREATE FUNCTION awa.rotate_lease_ring(p_keep integer) RETURNS text LANGUAGE plpgsql AS $$
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

CREATE FUNCTION awa.prune_lease_ring(p_lock_timeout_ms integer) RETURNS text
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

-- Cancels a job by id, whatever it is doing, and says what happened:
-- 'cancelled_running' (its open attempt is closed as cancelled and its worker told through
-- NOTIFY awa_cancel, so a late completion is stale), 'cancelled_queued' (a tombstone makes the
-- ready row unclaimable), 'cancelled_scheduled' (moved out of the backlog as a tombstoned ready
-- row), or 'not_cancellable' / 'not_found'.
-- A queued job's lane claim lock is taken first: claimers skip a locked lane, so a claim cannot
-- slip in between our check and the tombstone.
CREATE FUNCTION awa.cancel_job(p_job_id bigint, p_reason text) RETURNS text
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
    v_state text;
    v_row record;
    v_lane record;
    v_seq bigint;
BEGIN
    SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = p_job_id;
    IF NOT FOUND THEN
        RETURN 'not_found';
    END IF;
    IF v_state IN ('scheduled', 'retryable') THEN
        DELETE FROM awa.deferred_jobs d WHERE d.job_id = p_job_id RETURNING d.* INTO v_row;
        IF NOT FOUND THEN
            -- Promoted while we waited for its row lock: the job is now in the ready ring (a
            -- fresh statement sees the promoter's commit), so cancel it there.
            SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = p_job_id;
        END IF;
    END IF;
    IF v_state IN ('scheduled', 'retryable') THEN
        -- A ready row that is never published (it does not announce) and is tombstoned at
        -- once: it only records the job as cancelled, in the ring its history is read from.
        v_lane := awa.producer_slot();
        v_seq := nextval('awa.lane_seq');
        INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                       ready_generation, job_id, kind, args, attempt, run_lease,
                                       max_attempts, run_at, created_at, metadata, tags, errors)
        VALUES (v_row.queue, v_row.priority, 0, v_seq, v_lane.slot, v_lane.generation,
                v_row.job_id, v_row.kind, v_row.args, v_row.attempt, v_row.run_lease,
                v_row.max_attempts, v_row.run_at, v_row.created_at, v_row.metadata, v_row.tags,
                v_row.errors);
        INSERT INTO awa.ready_tombstones (queue, priority, shard, lane_seq, ready_slot, job_id,
                                          reason)
        VALUES (v_row.queue, v_row.priority, 0, v_seq, v_lane.slot, p_job_id, p_reason);
        RETURN 'cancelled_scheduled';
    END IF;
    IF v_state = 'available' THEN
        SELECT r.* INTO v_row FROM awa.ready_entries r
         WHERE r.job_id = p_job_id ORDER BY r.run_lease DESC LIMIT 1;
        PERFORM pg_advisory_xact_lock(
            1096237379, awa.lane_lock_key(v_row.queue, v_row.priority, v_row.shard));
        IF NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                        WHERE c.job_id = p_job_id AND c.run_lease = v_row.run_lease + 1
                          AND c.ready_slot = v_row.ready_slot) THEN
            INSERT INTO awa.ready_tombstones (queue, priority, shard, lane_seq, ready_slot,
                                              job_id, reason)
            VALUES (v_row.queue, v_row.priority, v_row.shard, v_row.lane_seq, v_row.ready_slot,
                    p_job_id, p_reason)
            ON CONFLICT DO NOTHING;
            RETURN 'cancelled_queued';
        END IF;
        -- Claimed after all: fall through to the running case.
    END IF;
    SELECT c.* INTO v_row FROM awa.claim_receipts c
     WHERE c.job_id = p_job_id ORDER BY c.run_lease DESC LIMIT 1;
    IF FOUND AND NOT EXISTS (SELECT 1 FROM awa.done_entries d
                              WHERE d.job_id = v_row.job_id AND d.run_lease = v_row.run_lease
                                AND d.ready_slot = v_row.ready_slot) THEN
        IF EXISTS (SELECT 1 FROM awa.close_attempts(json_build_array(json_build_object(
                'ready_slot', v_row.ready_slot, 'queue', v_row.queue,
                'priority', v_row.priority, 'shard', v_row.shard, 'lane_seq', v_row.lane_seq,
                'job_id', v_row.job_id, 'run_lease', v_row.run_lease, 'outcome', 'cancelled',
                'error', json_build_object('attempt', v_row.attempt, 'at', now(),
                                           'reason', p_reason))))) THEN
            PERFORM pg_notify('awa_cancel', v_row.job_id || ':' || v_row.run_lease);
            RETURN 'cancelled_running';
        END IF;
    END IF;
    RETURN 'not_cancellable';
END
$$;

-- Read surface: one row per job with its current state, hydrated from whichever table holds the
-- job's newest fact. Facts are ordered along a job's life by run_lease: a ready row waiting for
-- lease L+1 sits at 2L+1, its claim at 2(L+1), the closure just after, a deferred row after that.
CREATE VIEW awa.jobs AS
WITH facts AS (
    SELECT r.job_id, 2 * r.run_lease + 1 AS position,
           CASE WHEN t.job_id IS NULL THEN 'available' ELSE 'cancelled' END AS state,
           r.kind, r.queue, r.priority, r.args, r.attempt, r.run_lease, r.max_attempts, r.run_at,
           r.created_at, r.metadata, r.tags,
           CASE WHEN t.job_id IS NULL THEN r.errors
                ELSE r.errors || jsonb_build_array(jsonb_build_object(
                         'attempt', r.attempt, 'at', t.created_at, 'reason', t.reason))
           END AS errors,
           t.created_at AS finalized_at,
           NULL::jsonb AS result
      FROM awa.ready_entries r
      LEFT JOIN awa.ready_tombstones t
        ON t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
       AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot
    UNION ALL
    SELECT c.job_id, 2 * c.run_lease,
           -- An attempt with an unresumed callback waits on an outside system (docs/callbacks.md).
           CASE WHEN EXISTS (SELECT 1 FROM awa.leases x
                              WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease
                                AND x.callback_id IS NOT NULL AND x.callback_resumed_at IS NULL)
                THEN 'waiting_external' ELSE 'running' END,
           r.kind, r.queue, r.priority, r.args, c.attempt,
           c.run_lease, r.max_attempts, r.run_at, r.created_at, r.metadata, r.tags, r.errors,
           NULL, NULL
      FROM awa.claim_receipts c
      JOIN awa.ready_entries r
        ON r.queue = c.queue AND r.priority = c.priority AND r.shard = c.shard
       AND r.lane_seq = c.lane_seq AND r.ready_slot = c.ready_slot
    UNION ALL
    SELECT d.job_id, 2 * d.run_lease + 0.5, d.outcome, r.kind, r.queue, r.priority, r.args,
           d.attempt, d.run_lease, r.max_attempts, r.run_at, r.created_at, r.metadata, r.tags,
           CASE WHEN d.error IS NULL THEN r.errors ELSE r.errors || jsonb_build_array(d.error) END,
           d.finalized_at, d.result
      FROM awa.done_entries d
      JOIN awa.ready_entries r
        ON r.queue = d.queue AND r.priority = d.priority AND r.shard = d.shard
       AND r.lane_seq = d.lane_seq AND r.ready_slot = d.ready_slot
    UNION ALL
    SELECT f.job_id, 2 * f.run_lease + 0.75, f.state, f.kind, f.queue, f.priority, f.args,
           f.attempt, f.run_lease, f.max_attempts, f.run_at, f.created_at, f.metadata, f.tags,
           f.errors, NULL, NULL
      FROM awa.deferred_jobs f
    UNION ALL
    SELECT h.job_id, 2 * h.run_lease + 0.6, h.state, h.kind, h.queue, h.priority, h.args,
           h.attempt, h.run_lease, h.max_attempts, h.run_at, h.created_at, h.metadata, h.tags,
           h.errors, h.finalized_at, NULL
      FROM awa.terminal_history h
    UNION ALL
    SELECT q.job_id, 2 * q.original_run_lease + 0.9, 'dlq', q.kind, q.queue, q.priority, q.args,
           q.attempt, q.original_run_lease, q.max_attempts, NULL, q.created_at, q.metadata,
           q.tags, q.errors, q.dlq_at, NULL
      FROM awa.dlq_entries q
)
SELECT DISTINCT ON (job_id)
       job_id, state, kind, queue, priority, args, attempt, run_lease, max_attempts, run_at,
       created_at, metadata, tags, errors, finalized_at, result
  FROM facts
 ORDER BY job_id, position DESC;

-- ==== callbacks ====
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
CREATE FUNCTION awa.callback_status(p_job_id bigint, p_run_lease bigint, p_callback_id uuid)
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
CREATE FUNCTION awa.register_callback(p_job_id bigint, p_run_lease bigint, p_callback_id uuid,
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
CREATE FUNCTION awa.park_callback(p_job_id bigint, p_run_lease bigint, p_callback_id uuid)
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
CREATE FUNCTION awa.lock_callback(p_job_id bigint, p_run_lease bigint, p_callback_id uuid)
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
CREATE FUNCTION awa.take_callback_payload(p_job_id bigint, p_run_lease bigint,
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

-- ==== Scheduling: enqueue shards, ordering keys and priority aging (schedb) ====

-- How many lanes per (queue, priority) producers spread a queue's immediate jobs over. Changed
-- only by operators (awa_shards); 1 keeps the queue strictly FIFO per priority.
ALTER TABLE awa.queue_meta
    ADD COLUMN enqueue_shards smallint NOT NULL DEFAULT 1
        CHECK (enqueue_shards BETWEEN 1 AND 64);

-- The shard a new ready row of p_queue goes to: the same shard for every job with the same
-- ordering key (a stable hash, so related jobs stay in one FIFO lane), a random one otherwise
-- (spreading producers and claimers over the lanes). A queue without a meta row has one shard.
-- PL/pgSQL, not SQL: a SQL function that cannot be inlined is planned on every call, which cost
-- a single enqueue more than the rest of awa.enqueue_job together.
CREATE FUNCTION awa.enqueue_shard(p_queue text, p_ordering_key text) RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_shards integer;
BEGIN
    SELECT m.enqueue_shards INTO v_shards FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF v_shards IS NULL OR v_shards = 1 THEN
        RETURN 0;
    END IF;
    IF p_ordering_key IS NOT NULL THEN
        -- hashtextextended is the hash partitioning uses: stable across versions.
        RETURN ((hashtextextended(p_ordering_key, 0) & 9223372036854775807) % v_shards)::smallint;
    END IF;
    RETURN floor(random() * v_shards)::smallint;
END
$$;

-- The shard a job re-enters its queue on (promotion of a scheduled or retryable job, a retry
-- from the DLQ): its ordering key's, so a key keeps to one lane (and a sequential queue keeps
-- running it one job at a time); shard 0 for a job without a key.
CREATE FUNCTION awa.reentry_shard(p_queue text, p_metadata jsonb) RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_metadata ->> 'awa:ordering_key' IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key');
END
$$;

-- A waiting row's priority at claim time: one step more urgent per p_aging_s seconds since its
-- run_at, never above 1; p_aging_s <= 0 disables aging. Computed, never written back.
CREATE FUNCTION awa.effective_priority(p_priority smallint, p_run_at timestamptz,
                                       p_aging_s double precision) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_aging_s > 0
                THEN greatest(1, p_priority - least(
                         floor(greatest(extract(epoch FROM now() - p_run_at), 0) / p_aging_s),
                         32767)::integer)
                ELSE p_priority END
$$;

-- The row a claim of one lane takes next: the first unclaimed, untombstoned row of the cursor's
-- commit or of the first commit after it that has one. A hole in the commit positions is not
-- waited for here, as awa.claim_ready does: claim order and in-process runs only need to know
-- which lane to look at.
CREATE FUNCTION awa.lane_head(p_queue text, p_priority smallint, p_shard smallint)
RETURNS TABLE (job_id bigint, kind text, run_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT h.job_id, h.kind, h.run_at
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (
          SELECT c.commit_seq, c.lane_seq FROM awa.claim_receipts c
           WHERE c.queue = p_queue AND c.priority = p_priority AND c.shard = p_shard
           ORDER BY c.commit_seq DESC, c.lane_seq DESC LIMIT 1) c ON true
      CROSS JOIN LATERAL (
          SELECT r.job_id, r.kind, r.run_at
            FROM awa.lane_commits m
            CROSS JOIN LATERAL (
                SELECT r.job_id, r.kind, r.run_at FROM awa.ready_entries r
                 WHERE r.queue = p_queue AND r.priority = p_priority AND r.shard = p_shard
                   AND r.ready_slot = m.ready_slot
                   AND r.lane_seq BETWEEN m.first_seq AND m.last_seq AND r.batch = m.batch
                   AND (m.commit_seq > coalesce(c.commit_seq, 0) OR r.lane_seq > c.lane_seq)
                   AND NOT EXISTS (
                       SELECT 1 FROM awa.ready_tombstones t
                        WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                          AND t.lane_seq = r.lane_seq AND t.ready_slot = m.ready_slot)
                 ORDER BY r.lane_seq LIMIT 1) r
           WHERE m.queue = p_queue AND m.priority = p_priority AND m.shard = p_shard
             AND m.commit_seq >= coalesce(c.commit_seq, 0)
           ORDER BY m.commit_seq LIMIT 1) h
$$;

-- The lanes of p_queue in the order a claim visits them, with each lane's ``bound``: the
-- effective priority of the next lane's head (32767 for the last, or when there is no aging);
-- awa.claim_ready takes a lane's rows only while they are at least that urgent.
--
-- With aging, only lanes with a claimable head are returned, best first: by the head's
-- effective priority, then its run_at (the longest-waiting head wins a tie, which also orders
-- shards of one priority), then the lane. That costs a cursor and a head read per lane, so
-- without aging (or with a single lane) the order is static instead, as cheap as before aging
-- existed: by priority, and within a priority from a random shard onwards, so every shard of a
-- busy queue gets served.
CREATE FUNCTION awa.claim_order(p_queue text, p_aging_s double precision)
RETURNS TABLE (priority smallint, shard smallint, bound integer)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_lanes integer;
    v_shards integer;
BEGIN
    SELECT count(*), max(l.shard) + 1 INTO v_lanes, v_shards
      FROM awa.queue_lanes l WHERE l.queue = p_queue;
    IF v_lanes <= 1 OR p_aging_s <= 0 THEN
        RETURN QUERY
        WITH rotation AS (SELECT floor(random() * v_shards)::integer AS offset_by)
        SELECT l.priority, l.shard, 32767 FROM awa.queue_lanes l, rotation o
         WHERE l.queue = p_queue
         ORDER BY l.priority, (l.shard + o.offset_by) % v_shards;
        RETURN;
    END IF;
    RETURN QUERY
    WITH heads AS (
        SELECT l.priority, l.shard,
               awa.effective_priority(l.priority, h.run_at, p_aging_s) AS effective, h.run_at
          FROM awa.queue_lanes l
          CROSS JOIN LATERAL awa.lane_head(l.queue, l.priority, l.shard) h
         WHERE l.queue = p_queue
    )
    SELECT h.priority, h.shard, coalesce(lead(h.effective) OVER w, 32767)
      FROM heads h
    WINDOW w AS (ORDER BY h.effective, h.run_at, h.priority, h.shard)
     ORDER BY h.effective, h.run_at, h.priority, h.shard;
END
$$;

-- ==== Scheduling: fleet-wide rate limits (schedb) ====

-- Append-only ledger of the claims of fleet-limited queues. Each row carries the token bucket's
-- state after its claim as a single timestamp (GCRA): ``full_at`` is when the bucket would be
-- full again, so the bucket at time t holds burst - max(full_at - t, 0) * rate tokens. Only the
-- newest row of a queue is ever read; the leader deletes superseded rows in bounded batches. A
-- claim appends a row instead of updating a per-queue counter, so there is no hot row.
CREATE TABLE awa.rate_ledger (
    queue text NOT NULL,
    entry bigint GENERATED ALWAYS AS IDENTITY,
    claimed_at timestamptz NOT NULL,
    jobs integer NOT NULL CHECK (jobs > 0),
    full_at timestamptz NOT NULL,
    PRIMARY KEY (queue, entry)
);

-- Claims like awa.claim_ready, but never more than the queue's fleet-wide token bucket
-- (p_rate jobs per second, p_burst saved up) allows. Returns one row per claimed job (job set,
-- throttled_for_s NULL), then, when the budget rather than the work ran out, one row with a
-- NULL job and the seconds until the next token.
--
-- The budget is read and spent under a transaction-scoped advisory lock per queue, so two
-- claimers can never both spend the same tokens; claims of a fleet-limited queue queue up
-- behind each other for the length of one claim. Times come from clock_timestamp(): now() would
-- be the start of a transaction that may have waited for the lock.
CREATE FUNCTION awa.claim_ready_limited(
    p_queue text, p_limit integer, p_claimed_by text, p_deadline_s double precision,
    p_aging_s double precision, p_sequential boolean, p_rate double precision, p_burst integer
) RETURNS TABLE (job awa.claimed_job, throttled_for_s double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_full_at timestamptz;
    v_debt_s double precision;
    v_allowed integer;
    v_claimed integer := 0;
BEGIN
    -- 1096237396 = 'AWAT': the rate-limit lock class.
    PERFORM pg_advisory_xact_lock(1096237396, hashtext(p_queue));
    v_now := clock_timestamp();
    SELECT l.full_at INTO v_full_at FROM awa.rate_ledger l
     WHERE l.queue = p_queue ORDER BY l.entry DESC LIMIT 1;
    v_debt_s := greatest(extract(epoch FROM coalesce(v_full_at, v_now) - v_now), 0);
    v_allowed := least(p_limit, floor(p_burst - v_debt_s * p_rate)::integer);
    IF v_allowed > 0 THEN
        RETURN QUERY SELECT c, NULL::double precision
                       FROM awa.claim_ready(p_queue, v_allowed, p_claimed_by, p_deadline_s,
                                            p_aging_s, p_sequential) c;
        GET DIAGNOSTICS v_claimed = ROW_COUNT;
        IF v_claimed > 0 THEN
            INSERT INTO awa.rate_ledger (queue, claimed_at, jobs, full_at)
            VALUES (p_queue, v_now, v_claimed,
                    v_now + make_interval(secs => v_debt_s + v_claimed / p_rate));
        END IF;
    END IF;
    -- Throttled only when the claim took every job the budget allowed: fewer means the queue
    -- ran out of work first.
    IF v_allowed < p_limit AND v_claimed = greatest(v_allowed, 0) THEN
        RETURN QUERY SELECT NULL::awa.claimed_job,
                            greatest(v_debt_s + v_claimed / p_rate - (p_burst - 1) / p_rate,
                                     0.001);
    END IF;
END
$$;

-- ==== ops: dead-letter queue, descriptors, runtime instances, queue health ====
-- Operator surfaces (docs/operations.md). Routing into awa.dlq_entries happens in
-- awa.close_attempts (the `dead` step) for queues whose queue_meta.dlq_enabled is set.

-- Listing and retention read the DLQ newest or oldest first, across queues.
CREATE INDEX dlq_entries_dlq_at ON awa.dlq_entries (dlq_at, job_id);
CREATE INDEX dlq_entries_kind_dlq_at ON awa.dlq_entries (kind, dlq_at DESC);

-- Closures by time, for the leader's completed/failed counts. BRIN: closures are appended in
-- roughly finalized_at order, so a block-range summary finds the recent ones while costing the
-- hot path next to nothing (no per-row btree insert).
CREATE INDEX done_entries_finalized_at ON awa.done_entries USING brin (finalized_at);

-- What code declares about a queue (AWA["QUEUES"][name]) and a job kind (@awa.job), upserted by
-- every worker at start and with each runtime snapshot. descriptor_hash covers the content;
-- refreshed_at says when a live worker last vouched for it (stale when nobody did recently).
CREATE TABLE awa.queue_descriptors (
    queue text PRIMARY KEY,
    display_name text NOT NULL,
    description text NOT NULL,
    owner text NOT NULL,
    dlq_enabled boolean NOT NULL,
    descriptor_hash text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    refreshed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE awa.kind_descriptors (
    kind text PRIMARY KEY,
    queue text,
    description text NOT NULL,
    owner text NOT NULL,
    docs_url text NOT NULL,
    descriptor_hash text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    refreshed_at timestamptz NOT NULL DEFAULT now()
);

-- One row per live worker (or awa_maintenance) process, rewritten every
-- RUNTIME_SNAPSHOT_INTERVAL_S; the leader deletes rows silent for RUNTIME_STALE_AFTER_S.
-- queue_hashes / kind_hashes are the descriptor hashes this process declares, so drift (two
-- live processes declaring one queue differently) is visible.
CREATE TABLE awa.runtime_instances (
    instance_id text PRIMARY KEY,
    hostname text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    queues jsonb NOT NULL,
    in_flight integer NOT NULL,
    is_leader boolean NOT NULL,
    healthy boolean NOT NULL,
    shutting_down boolean NOT NULL,
    queue_hashes jsonb NOT NULL,
    kind_hashes jsonb NOT NULL
);

-- The leader's queue-stats pass appends one sample per queue (depth by state, lag, and the
-- completions and failures since the previous pass) for the last-hour charts and throughput.
-- A plain table of a few hundred rows per queue, trimmed by the same pass.
CREATE TABLE awa.queue_stat_samples (
    queue text NOT NULL,
    sampled_at timestamptz NOT NULL,
    available integer NOT NULL,
    scheduled integer NOT NULL,
    retryable integer NOT NULL,
    running integer NOT NULL,
    waiting_external integer NOT NULL,
    dlq integer NOT NULL,
    lag_s double precision NOT NULL,
    completed integer NOT NULL,
    failed integer NOT NULL,
    PRIMARY KEY (queue, sampled_at)
);
CREATE INDEX queue_stat_samples_sampled_at ON awa.queue_stat_samples (sampled_at);

-- Puts DLQ entries back as fresh attempts and returns the ids it moved: attempt 0, the error
-- history kept, run_lease one past the failed attempt's. The step keeps every later fact of the
-- job ranked after every earlier one in awa.jobs even when the job never ran under that lease (a
-- cancelled job's tombstoned ready row sits at the same lease), and the next claim takes a
-- larger lease still.
-- p_run_at in the future defers the job (scheduled); NULL or past makes it ready at once.
-- p_queue / p_priority (NULL: keep) move it to another lane.
CREATE FUNCTION awa.dlq_retry(p_job_ids bigint[], p_run_at timestamptz, p_queue text,
                              p_priority smallint)
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    v_slot record;
    v_seqs bigint[];
BEGIN
    IF p_run_at IS NOT NULL AND p_run_at > now() THEN
        RETURN QUERY
        WITH taken AS (
            DELETE FROM awa.dlq_entries d WHERE d.job_id = ANY (p_job_ids) RETURNING d.*
        )
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        SELECT t.job_id, 'scheduled', t.kind, coalesce(p_queue, t.queue),
               coalesce(p_priority, t.priority), t.args, 0, t.original_run_lease + 1,
               t.max_attempts, p_run_at, t.created_at, t.metadata, t.tags, t.errors
          FROM taken t
        RETURNING job_id;
        RETURN;
    END IF;
    v_slot := awa.producer_slot();
    -- Increasing and handed out in (lane, job_id) order: as in awa.promote_due, each lane's
    -- announcing row has its lowest number. An entry a concurrent retry took meanwhile just
    -- leaves a number unused.
    v_seqs := ARRAY(SELECT nextval('awa.lane_seq')
                      FROM generate_series(1, coalesce(cardinality(p_job_ids), 0)));
    RETURN QUERY
    WITH taken AS (
        DELETE FROM awa.dlq_entries d WHERE d.job_id = ANY (p_job_ids)
        RETURNING d.*, coalesce(p_queue, d.queue) AS to_queue,
                  coalesce(p_priority, d.priority) AS to_priority
    ), placed AS (
        SELECT t.*, awa.reentry_shard(t.to_queue, t.metadata) AS to_shard FROM taken t
    ), numbered AS (
        SELECT p.*,
               row_number() OVER (ORDER BY p.to_queue, p.to_priority, p.to_shard, p.job_id)
                   AS position,
               row_number() OVER (PARTITION BY p.to_queue, p.to_priority, p.to_shard
                                  ORDER BY p.job_id) = 1 AS announce
          FROM placed p
    )
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                   ready_generation, job_id, kind, args, attempt, run_lease,
                                   max_attempts, run_at, created_at, metadata, tags, errors,
                                   announce)
    SELECT n.to_queue, n.to_priority, n.to_shard, v_seqs[n.position], v_slot.slot,
           v_slot.generation, n.job_id, n.kind, n.args, 0, n.original_run_lease + 1,
           n.max_attempts, now(), n.created_at, n.metadata, n.tags, n.errors, n.announce
      FROM numbered n
    RETURNING job_id;
END
$$;

-- Moves failed (or cancelled) jobs into the DLQ with p_reason and returns the ids it moved:
-- jobs whose current state is one of p_states, still in the ring or in terminal_history (whose
-- row goes, so the job is held in one place). A job already in the DLQ is left alone.
CREATE FUNCTION awa.dlq_move(p_job_ids bigint[], p_states text[], p_reason text)
RETURNS SETOF bigint LANGUAGE sql AS $$
    WITH moved AS (
        INSERT INTO awa.dlq_entries (job_id, kind, queue, priority, args, attempt,
                                     original_run_lease, max_attempts, created_at, metadata,
                                     tags, errors, dlq_reason)
        SELECT j.job_id, j.kind, j.queue, j.priority, j.args, j.attempt, j.run_lease,
               j.max_attempts, j.created_at, j.metadata, j.tags, j.errors, p_reason
          FROM awa.jobs j
         WHERE j.job_id = ANY (p_job_ids) AND j.state = ANY (p_states)
        ON CONFLICT (job_id) DO NOTHING
        RETURNING job_id
    ), forgotten AS (
        DELETE FROM awa.terminal_history h USING moved m WHERE h.job_id = m.job_id
    )
    SELECT m.job_id FROM moved m ORDER BY m.job_id
$$;

-- Cancels every pending job of a queue (available, scheduled, retryable) through
-- awa.cancel_job, so each is withdrawn the way a single cancel would; returns how many.
-- Running attempts are left to finish.
CREATE FUNCTION awa.drain_queue(p_queue text, p_reason text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
    v_cancelled integer := 0;
BEGIN
    FOR v_job_id IN
        SELECT d.job_id FROM awa.deferred_jobs d WHERE d.queue = p_queue
        UNION
        SELECT r.job_id FROM awa.ready_entries r
         WHERE r.queue = p_queue
           AND NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                            WHERE c.job_id = r.job_id AND c.run_lease = r.run_lease + 1
                              AND c.ready_slot = r.ready_slot)
           AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                            WHERE t.queue = r.queue AND t.priority = r.priority
                              AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                              AND t.ready_slot = r.ready_slot)
    LOOP
        IF awa.cancel_job(v_job_id, p_reason) IN ('cancelled_queued', 'cancelled_scheduled') THEN
            v_cancelled := v_cancelled + 1;
        END IF;
    END LOOP;
    RETURN v_cancelled;
END
$$;

-- ==== Cron schedules and unique claims ====

-- One row per periodic schedule. Deployments upsert the schedules they declare and never delete
-- one (removal is an explicit operator action). last_fire_at is the newest tick enqueued: the
-- leader's compare-and-swap on it (awa.fire_cron) is what keeps a tick from firing twice across
-- a leader failover. resumed_at takes part in the same swap, so ticks that fell inside a pause
-- are never fired by an evaluation that read the row before the pause.
CREATE TABLE awa.cron_jobs (
    name text PRIMARY KEY,
    cron_expr text NOT NULL,
    timezone text NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL,
    priority smallint NOT NULL,
    max_attempts integer NOT NULL,
    tags text[] NOT NULL,
    metadata jsonb NOT NULL,
    missed_fire_policy text NOT NULL CHECK (missed_fire_policy IN ('coalesce', 'catch_up')),
    last_fire_at timestamptz,
    paused_at timestamptz,
    paused_by text,
    resumed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- Enqueues the given ticks of one schedule, oldest first, if and only if the schedule is
-- unpaused and still stands where the caller read it; returns the new job ids (none when the
-- swap lost). The UPDATE takes the schedule's row lock, so a concurrent pause either commits
-- first (the re-checked WHERE then fails) or waits for this fire to commit; a second leader
-- that read the same row blocks here and then finds last_fire_at moved. The jobs are enqueued
-- in the same transaction as the swap: both commit or neither does.
CREATE FUNCTION awa.fire_cron(p_name text, p_expected_last timestamptz,
                              p_expected_resumed timestamptz, p_ticks timestamptz[])
RETURNS TABLE (job_id bigint, kind text, queue text) LANGUAGE plpgsql AS $$
DECLARE
    v_row awa.cron_jobs;
    v_tick timestamptz;
BEGIN
    UPDATE awa.cron_jobs c SET last_fire_at = p_ticks[array_upper(p_ticks, 1)]
     WHERE c.name = p_name AND c.paused_at IS NULL
       AND c.last_fire_at IS NOT DISTINCT FROM p_expected_last
       AND c.resumed_at IS NOT DISTINCT FROM p_expected_resumed
    RETURNING c.* INTO v_row;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The kind and queue the jobs got, as the fire read them, for the caller's announcement.
    kind := v_row.kind;
    queue := v_row.queue;
    FOREACH v_tick IN ARRAY p_ticks LOOP
        job_id := awa.enqueue_job(
            v_row.kind, v_row.queue, v_row.priority, v_row.args, v_row.max_attempts, NULL,
            v_row.metadata || jsonb_build_object(
                'awa_cron', jsonb_build_object('name', v_row.name, 'fire_at', v_tick)),
            v_row.tags);
        RETURN NEXT;
    END LOOP;
END
$$;

-- Who holds a unique key. A claim belongs to one job and covers the states it was enqueued
-- with; it is never touched by the worker's hot path. A job that left those states (or whose
-- history was pruned) still owns the row until the next enqueue of the key takes it over:
-- awa.lock_unique_keys checks the holder's current state, so the release is exact without a
-- write at every transition.
CREATE TABLE awa.unique_claims (
    unique_key bytea PRIMARY KEY,
    job_id bigint NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    states text[] NOT NULL,
    -- End of the period bucket the key belongs to (NULL for keys without a period): past it,
    -- no enqueue can compute this key again, so the claim can be dropped without a state check.
    expires_at timestamptz,
    claimed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX unique_claims_expires_at ON awa.unique_claims (expires_at)
    WHERE expires_at IS NOT NULL;

-- Locks the given unique keys for the calling transaction, in key order (two batches sharing
-- keys cannot deadlock on each other), and returns the keys still held: whose holder job is in
-- one of its covered states right now. Each key's transaction-scoped advisory lock is held until
-- the caller commits, so a concurrent producer of the same key waits here and then, reading
-- with a fresh snapshot after the lock, sees this caller's committed claim.
-- 1096237397 = 'AWAU': the unique-key lock class; keys hashing alike merely share a lock.
CREATE FUNCTION awa.lock_unique_keys(p_keys bytea[])
RETURNS TABLE (unique_key bytea, job_id bigint, state text)
LANGUAGE plpgsql AS $$
DECLARE
    v_key bytea;
    v_claim record;
    v_state text;
BEGIN
    FOR v_key IN SELECT DISTINCT k FROM unnest(p_keys) AS k ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(1096237397, hashtext(encode(v_key, 'hex')));
    END LOOP;
    FOR v_claim IN
        SELECT c.unique_key, c.job_id, c.states FROM awa.unique_claims c
         WHERE c.unique_key = ANY (p_keys)
    LOOP
        -- One job at a time, by id, so the view is read through its per-table job_id indexes.
        -- The cached generic plan keeps that (job_id is no partition key); planning the view
        -- afresh on every call would cost more than the lookup itself.
        SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = v_claim.job_id;
        IF FOUND AND v_state = ANY (v_claim.states) THEN
            unique_key := v_claim.unique_key;
            job_id := v_claim.job_id;
            state := v_state;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

-- Deletes unique claims that can no longer conflict, at most p_limit of each kind per call, and
-- returns how many went and where the scan of keys without a period stopped (NULL at the end of
-- the table, so the caller starts over). Claims of an ended period go without a check: no
-- enqueue computes those keys again (one minute of grace covers producers whose clock lags).
-- Any other claim goes once its holder left its covered states or was pruned, checked after
-- taking the key's lock with a fresh snapshot, so a producer that took the key over meanwhile
-- is seen; a key a producer holds right now is skipped until the next pass. Nothing depends on
-- this cleanup for correctness: it only keeps the table from growing with dead keys.
CREATE FUNCTION awa.sweep_unique_claims(p_limit integer, p_after bytea)
RETURNS TABLE (deleted integer, next_after bytea) LANGUAGE plpgsql AS $$
DECLARE
    v_key bytea;
    v_job_id bigint;
    v_states text[];
    v_state text;
    v_seen integer := 0;
    v_count integer;
BEGIN
    deleted := 0;
    WITH ended AS (
        SELECT c.unique_key FROM awa.unique_claims c
         WHERE c.expires_at < now() - interval '1 minute'
         ORDER BY c.expires_at LIMIT p_limit
    )
    DELETE FROM awa.unique_claims c USING ended e WHERE c.unique_key = e.unique_key;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    FOR v_key IN
        SELECT c.unique_key FROM awa.unique_claims c
         WHERE c.expires_at IS NULL AND c.unique_key > coalesce(p_after, '\x'::bytea)
         ORDER BY c.unique_key LIMIT p_limit
    LOOP
        v_seen := v_seen + 1;
        next_after := v_key;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(1096237397, hashtext(encode(v_key, 'hex')));
        SELECT c.job_id, c.states INTO v_job_id, v_states FROM awa.unique_claims c
         WHERE c.unique_key = v_key;
        CONTINUE WHEN NOT FOUND;
        SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = v_job_id;
        CONTINUE WHEN FOUND AND v_state = ANY (v_states);
        DELETE FROM awa.unique_claims c WHERE c.unique_key = v_key AND c.job_id = v_job_id;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        deleted := deleted + v_count;
    END LOOP;
    IF v_seen < p_limit THEN
        next_after := NULL;
    END IF;
    RETURN NEXT;
END
$$;
