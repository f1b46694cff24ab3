-- Control plane: leadership, ring rotation and prune, retention, and the operators' queue
-- controls (pause, resume, live concurrency, drain).

-- name: try_leader_lock
-- Tries the session-scoped maintenance leader lock (held until released or the session ends).
SELECT pg_try_advisory_lock(%(key)s::bigint) AS acquired

-- name: release_leader_lock
-- Gives the leader lock back on shutdown so another process can take over at once.
SELECT pg_advisory_unlock(%(key)s::bigint) AS released

-- name: ping
-- Proves the leader's session (and so its lock) is still alive.
SELECT 1

-- name: rotate_queue_ring
-- One rotation attempt of the queue ring (see awa.rotate_queue_ring).
SELECT awa.rotate_queue_ring(%(keep)s::integer) AS outcome

-- name: prune_queue_ring
-- One prune attempt of the oldest sealed queue-ring slot (see awa.prune_queue_ring).
SELECT awa.prune_queue_ring(%(completed_retention_s)s::double precision,
                            %(failed_retention_s)s::double precision,
                            %(lock_timeout_ms)s::integer) AS outcome

-- name: rotate_lease_ring
-- One rotation attempt of the lease ring.
SELECT awa.rotate_lease_ring(%(keep)s::integer) AS outcome

-- name: prune_lease_ring
-- Truncates emptied lease slots.
SELECT awa.prune_lease_ring(%(lock_timeout_ms)s::integer) AS outcome

-- name: delete_expired_dlq
-- Deletes one bounded batch of DLQ entries older than the retention; returns how many.
WITH expired AS (
    SELECT job_id FROM awa.dlq_entries
     WHERE dlq_at < now() - make_interval(secs => %(retention_s)s::double precision)
     ORDER BY dlq_at LIMIT %(limit)s::integer
), deleted AS (
    DELETE FROM awa.dlq_entries d USING expired e WHERE d.job_id = e.job_id RETURNING 1
)
SELECT count(*)::integer FROM deleted

-- name: delete_expired_terminal_history
-- Deletes one bounded batch of failed/cancelled history older than the retention; returns how
-- many.
WITH expired AS (
    SELECT job_id FROM awa.terminal_history
     WHERE finalized_at < now() - make_interval(secs => %(retention_s)s::double precision)
     ORDER BY finalized_at LIMIT %(limit)s::integer
), deleted AS (
    DELETE FROM awa.terminal_history h USING expired e WHERE h.job_id = e.job_id RETURNING 1
)
SELECT count(*)::integer FROM deleted

-- name: reset_all
-- Empties every awa table except static ring configuration, drops the lanes' commit sequences
-- with their queue_lanes rows, and puts both rings back at genesis. For test suites and
-- benchmarks only: it deletes every job. Only the tables that hold rows (and those holding a
-- foreign key) are truncated, and the rings' rotation tables only when they moved past
-- genesis: a TRUNCATE gives each relation and index new files, which costs more than a test
-- that wrote to three tables.
DO $$
DECLARE
    v_table text;
    v_has_rows boolean;
    v_tables text[] := '{}';
BEGIN
    PERFORM awa.drop_lane_sequences();
    FOR v_table IN
        SELECT format('%I.%I', n.nspname, c.relname)
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'awa' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
           AND c.relname NOT IN ('ring_config', 'queue_ring_rotations', 'lease_ring_rotations')
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT FROM %s)', v_table) INTO v_has_rows;
        -- A table that holds a foreign key goes in even when empty: PostgreSQL truncates a
        -- referenced table only together with the tables referencing it.
        IF v_has_rows OR EXISTS (
            SELECT FROM pg_constraint
             WHERE contype = 'f' AND conrelid = v_table::regclass
        ) THEN
            v_tables := v_tables || v_table;
        END IF;
    END LOOP;
    IF cardinality(v_tables) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(v_tables, ', ');
    END IF;
    IF EXISTS (SELECT FROM awa.queue_ring_rotations WHERE (generation, slot) <> (0, 0))
       OR NOT EXISTS (SELECT FROM awa.queue_ring_rotations) THEN
        TRUNCATE awa.queue_ring_rotations;
        INSERT INTO awa.queue_ring_rotations (generation, slot) VALUES (0, 0);
    END IF;
    IF EXISTS (SELECT FROM awa.lease_ring_rotations WHERE (generation, slot) <> (0, 0))
       OR NOT EXISTS (SELECT FROM awa.lease_ring_rotations) THEN
        TRUNCATE awa.lease_ring_rotations;
        INSERT INTO awa.lease_ring_rotations (generation, slot) VALUES (0, 0);
    END IF;
END
$$

-- name: lock_leader_lease
-- Poll-only processes (AWA['WORKER_SESSION'] = False) hold no session, so leadership is a lease
-- on their awa.runtime_instances row (is_leader, renewed through last_seen_at). Taking or
-- renewing it runs in one transaction that first takes this transaction-scoped lock, so the
-- check below and the write after it see every other elector's committed lease.
SELECT pg_advisory_xact_lock(%(key)s::bigint)

-- name: take_leader_lease
-- Takes (or renews) the lease for this instance unless another instance holds a lease that has
-- not expired; one row when this instance leads. Run after lock_leader_lease, in its transaction.
UPDATE awa.runtime_instances
   SET is_leader = true, last_seen_at = now()
 WHERE instance_id = %(instance_id)s
   AND NOT EXISTS (
       SELECT 1 FROM awa.runtime_instances other
        WHERE other.is_leader
          AND other.instance_id <> %(instance_id)s
          AND other.last_seen_at > now() - make_interval(secs => %(ttl_s)s::double precision))
RETURNING instance_id

-- name: release_leader_lease
-- Gives the lease back on shutdown so another process can take over at once.
UPDATE awa.runtime_instances SET is_leader = false WHERE instance_id = %(instance_id)s

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
-- deferred job of the queue, and each ready row that waits, awa.waiting_entries), counted once.
SELECT count(*)::integer FROM (
    SELECT d.job_id FROM awa.deferred_jobs d WHERE d.queue = %(queue)s
    UNION
    SELECT w.job_id FROM awa.waiting_entries(%(queue)s::text) w
) pending
