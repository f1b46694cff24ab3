-- The dead-letter queue: retry, move and drain.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Puts DLQ entries back as fresh attempts and returns the ids it moved: attempt 0, the error
-- history kept, run_lease one past the failed attempt's. The step keeps every later fact of the
-- job ranked after every earlier one in awa.jobs even when the job never ran under that lease (a
-- cancelled job's tombstoned ready row sits at the same lease), and the next claim takes a
-- larger lease still.
-- p_run_at in the future defers the job (scheduled); NULL or past makes it ready at once.
-- p_queue / p_priority (NULL: keep) move it to another lane.
CREATE OR REPLACE FUNCTION awa.dlq_retry(p_job_ids bigint[], p_run_at timestamptz, p_queue text,
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
CREATE OR REPLACE FUNCTION awa.dlq_move(p_job_ids bigint[], p_states text[], p_reason text)
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

-- An error message with what varies between occurrences of one failure replaced: UUIDs, hex
-- strings of 6 or more characters holding a digit (hashes, addresses, 0x values) and numbers,
-- so "order 12 not found" and "order 9481 not found" share the fingerprint "order <n> not
-- found". Only the first 500 characters count, so a huge message costs a bounded amount.
CREATE OR REPLACE FUNCTION awa.error_fingerprint(p_message text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT regexp_replace(
               regexp_replace(
                   regexp_replace(
                       regexp_replace(left(coalesce(p_message, ''), 500),
                                      '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
                                      '<id>', 'gi'),
                       '\m0x[0-9a-f]+\M', '<hex>', 'gi'),
                   '\m(?=[0-9a-f]*[0-9])[0-9a-f]{6,}\M', '<hex>', 'gi'),
               '[0-9]+', '<n>', 'g')
$$;

-- Deletes DLQ entries for good and returns the ids it deleted. An entry made from the ring
-- (not moved in from terminal history) leaves its ready row and failed closure there, which
-- the ring cannot delete: those jobs get a marker in awa.purged_jobs that hides them from
-- awa.jobs, so nothing reads their arguments or errors or retries them again.
CREATE OR REPLACE FUNCTION awa.dlq_purge(p_job_ids bigint[]) RETURNS SETOF bigint
LANGUAGE sql AS $$
    WITH purged AS (
        DELETE FROM awa.dlq_entries d WHERE d.job_id = ANY (p_job_ids) RETURNING d.job_id
    ), marked AS (
        INSERT INTO awa.purged_jobs (job_id)
        SELECT p.job_id FROM purged p
         WHERE EXISTS (SELECT 1 FROM awa.ready_entries r WHERE r.job_id = p.job_id)
        ON CONFLICT (job_id) DO NOTHING
    )
    SELECT p.job_id FROM purged p ORDER BY p.job_id
$$;

-- Cancels every pending job of a queue (available, scheduled, retryable) through
-- awa.cancel_job, so each is withdrawn the way a single cancel would; returns how many.
-- Running attempts are left to finish. The ready rows are those that wait
-- (awa.waiting_entries), not every ready row of the queue probed for its claim.
CREATE OR REPLACE FUNCTION awa.drain_queue(p_queue text, p_reason text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
    v_cancelled integer := 0;
BEGIN
    FOR v_job_id IN
        SELECT d.job_id FROM awa.deferred_jobs d WHERE d.queue = p_queue
        UNION
        SELECT w.job_id FROM awa.waiting_entries(p_queue) w
    LOOP
        IF awa.cancel_job(v_job_id, p_reason) IN ('cancelled_queued', 'cancelled_scheduled') THEN
            v_cancelled := v_cancelled + 1;
        END IF;
    END LOOP;
    RETURN v_cancelled;
END
$$;

-- Whether an operator's prefix (lower-cased) starts p_name or one of its dotted parts, in any
-- case: "lookup" matches builtins.LookupError, "tasks.ch" shop.tasks.Charge.
CREATE OR REPLACE FUNCTION awa.name_part_starts(p_name text, p_prefix text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT starts_with(lower(p_name), p_prefix) OR strpos(lower(p_name), '.' || p_prefix) > 0
$$;

-- The distinct last-error types of the DLQ ('(none)' for an error without one) that p_prefix
-- matches (awa.name_part_starts), found by a loose scan of dlq_entries_error_type (migration
-- 0032): each step reads the first index entry past the previous type, so the DLQ costs one
-- probe per distinct type (tens), not a read of its entries' error lists. The filter then reads
-- the entries of these types from the same index.
CREATE OR REPLACE FUNCTION awa.dlq_error_types(p_prefix text) RETURNS text[]
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE types (error_type) AS (
        (SELECT coalesce(d.errors -> -1 ->> 'type', '(none)') FROM awa.dlq_entries d
          ORDER BY 1 LIMIT 1)
        UNION ALL
        SELECT n.error_type FROM types t CROSS JOIN LATERAL (
            SELECT coalesce(d.errors -> -1 ->> 'type', '(none)') AS error_type
              FROM awa.dlq_entries d
             WHERE coalesce(d.errors -> -1 ->> 'type', '(none)') > t.error_type
             ORDER BY 1 LIMIT 1) n
    )
    SELECT coalesce(array_agg(t.error_type), '{}') FROM types t
     WHERE awa.name_part_starts(t.error_type, p_prefix)
$$;

-- The distinct kinds of the DLQ that p_prefix matches, by a loose scan of
-- dlq_entries_kind_dlq_at, as awa.dlq_error_types finds the types.
CREATE OR REPLACE FUNCTION awa.dlq_kinds(p_prefix text) RETURNS text[]
LANGUAGE sql STABLE AS $$
    WITH RECURSIVE kinds (kind) AS (
        (SELECT d.kind FROM awa.dlq_entries d ORDER BY d.kind LIMIT 1)
        UNION ALL
        SELECT n.kind FROM kinds k CROSS JOIN LATERAL (
            SELECT d.kind FROM awa.dlq_entries d WHERE d.kind > k.kind ORDER BY d.kind LIMIT 1) n
    )
    SELECT coalesce(array_agg(k.kind), '{}') FROM kinds k
     WHERE awa.name_part_starts(k.kind, p_prefix)
$$;
