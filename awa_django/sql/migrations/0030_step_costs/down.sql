-- Reverses 0030_step_costs: the foreign keys of the steps and edges come back (the rows prune
-- leaves are whole workflows, so none is orphaned), the steps' table fills its pages again, and
-- awa.workflow_steps_ended, awa.workflow_prune and awa.close_batch (which now passes each
-- step's workflow id) are restored as the migrations before left them.
ALTER TABLE awa.workflow_steps RESET (fillfactor);
ALTER TABLE awa.workflow_steps ADD CONSTRAINT workflow_steps_workflow_id_fkey
    FOREIGN KEY (workflow_id) REFERENCES awa.workflows ON DELETE CASCADE;
ALTER TABLE awa.workflow_edges ADD CONSTRAINT workflow_edges_workflow_id_to_step_fkey
    FOREIGN KEY (workflow_id, to_step) REFERENCES awa.workflow_steps ON DELETE CASCADE;

-- Records that steps ended and does what follows, in the caller's transaction. p_ended is a
-- JSON array of {job_id, outcome, error, result}, outcome as awa.done_entries has it; items
-- whose job is no step, or whose step already ended, change nothing (every closer may call
-- this, and a rescue and a worker may both report one attempt).
--
-- For each step that ended: a completed one decrements each held dependent's remaining_deps,
-- and the dependents that reach zero are released (all together, at the end). One that
-- failed or was cancelled decrements the dependents that ignore its failure and cancels the
-- others, recording which step and why; the cancelled dependents are processed in turn, so a
-- cancel runs down the whole graph. A failure routed to the dead-letter queue parks the step
-- as dead_lettered: its dependents keep waiting, as a retry from the DLQ resumes it. The step
-- that brings the workflow's unfinished count to zero finishes it, unless it has an
-- on_failure step and a step did not complete: that step is then released, and the workflow
-- finishes when it ends. An on_failure step that is not needed is marked skipped.
--
-- The common case, a step that completed and added no steps, of a workflow not cancelled, is
-- done for the whole batch in a few set statements (one update of the steps, one of each
-- workflow's counters, one of the dependents' counts), before the loop that handles the rest
-- one item at a time: a close batch of n steps of one workflow made n updates of that
-- workflow's row and n of its steps, which made a step's close cost ten times a job's.
CREATE OR REPLACE FUNCTION awa.workflow_steps_ended(p_ended jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_jobs bigint[];
    v_outcomes text[];
    v_errors jsonb[];
    v_results jsonb[];
    v_adds jsonb[];
    v_i integer := 1;
    v_state text;
    v_step record;
    v_dep record;
    v_wf record;
    v_left integer;
    v_release bigint[] := '{}';
    v_handler bigint;
    v_fast bigint[];
    v_settled jsonb;
BEGIN
    -- Held back while awa.workflow_cancel closes the running steps of a workflow without its
    -- lock; it does their bookkeeping itself.
    IF current_setting('awa.workflow_hold', true) = 'on' THEN
        RETURN;
    END IF;
    SELECT array_agg(e.job_id) INTO v_jobs
      FROM jsonb_to_recordset(p_ended) AS e(job_id bigint);
    IF v_jobs IS NULL THEN
        RETURN;
    END IF;
    PERFORM awa.workflow_lock(w.workflow_id)
       FROM (SELECT DISTINCT s.workflow_id FROM awa.workflow_steps s
              WHERE s.job_id = ANY (v_jobs) ORDER BY 1) w;
    -- The common case, for the whole batch at once (see above).
    WITH ended AS (
        SELECT e.job_id, e.error, e.result
          FROM jsonb_to_recordset(p_ended) AS e(job_id bigint, outcome text, error jsonb,
                                                 result jsonb, add jsonb)
         WHERE e.outcome = 'completed' AND jsonb_typeof(e.add) IS DISTINCT FROM 'array'
    ), done AS (
        UPDATE awa.workflow_steps s
           SET state = 'completed', result = e.result, error = e.error, finished_at = now()
          FROM ended e
         WHERE s.job_id = e.job_id AND s.state IN ('held', 'released', 'dead_lettered')
           AND NOT s.on_failure
           AND NOT EXISTS (SELECT 1 FROM awa.workflows w
                            WHERE w.workflow_id = s.workflow_id
                              AND w.cancel_reason IS NOT NULL)
        RETURNING s.workflow_id, s.name, s.job_id
    ), counted AS (
        UPDATE awa.workflows w SET unfinished = w.unfinished - c.steps
          FROM (SELECT d.workflow_id, count(*)::integer AS steps FROM done d
                 GROUP BY d.workflow_id) c
         WHERE w.workflow_id = c.workflow_id
        RETURNING w.workflow_id, w.unfinished, w.failures, w.cancel_reason
    ), dependents AS (
        UPDATE awa.workflow_steps t SET remaining_deps = t.remaining_deps - n.deps
          FROM (SELECT e.workflow_id, e.to_step, count(*)::integer AS deps
                  FROM done d
                  JOIN awa.workflow_edges e
                    ON e.workflow_id = d.workflow_id AND e.from_step = d.name
                 GROUP BY e.workflow_id, e.to_step) n
         WHERE t.workflow_id = n.workflow_id AND t.name = n.to_step AND t.state = 'held'
        RETURNING t.job_id, t.remaining_deps
    )
    SELECT (SELECT coalesce(array_agg(d.job_id), '{}') FROM done d),
           (SELECT coalesce(array_agg(p.job_id ORDER BY p.job_id), '{}') FROM dependents p
             WHERE p.remaining_deps = 0),
           (SELECT coalesce(jsonb_agg(to_jsonb(c) ORDER BY c.workflow_id), '[]') FROM counted c
             WHERE c.unfinished = 0)
      INTO v_fast, v_release, v_settled;
    FOR v_wf IN
        SELECT * FROM jsonb_to_recordset(v_settled)
            AS c(workflow_id bigint, unfinished integer, failures integer, cancel_reason text)
    LOOP
        v_handler := awa.workflow_settle(v_wf.workflow_id, v_wf.failures, v_wf.cancel_reason);
        IF v_handler IS NOT NULL THEN
            v_release := v_release || v_handler;
        END IF;
    END LOOP;
    -- The rest, one item at a time.
    SELECT array_agg(e.job_id), array_agg(e.outcome), array_agg(e.error), array_agg(e.result),
           array_agg(e.add)
      INTO v_jobs, v_outcomes, v_errors, v_results, v_adds
      FROM jsonb_to_recordset(p_ended) AS e(job_id bigint, outcome text, error jsonb,
                                             result jsonb, add jsonb)
     WHERE e.job_id <> ALL (v_fast);
    IF v_jobs IS NULL THEN
        PERFORM awa.workflow_release(v_release);
        RETURN;
    END IF;
    WHILE v_i <= cardinality(v_jobs) LOOP
        v_state := CASE v_outcomes[v_i]
            WHEN 'completed' THEN 'completed'
            WHEN 'cancelled' THEN 'cancelled'
            WHEN 'skipped' THEN 'skipped'
            WHEN 'failed' THEN CASE WHEN EXISTS (SELECT 1 FROM awa.dlq_entries q
                                                  WHERE q.job_id = v_jobs[v_i])
                                    THEN 'dead_lettered' ELSE 'failed' END
            END;
        IF v_state IS NOT NULL THEN
            UPDATE awa.workflow_steps s
               SET state = v_state, result = v_results[v_i], error = v_errors[v_i],
                   finished_at = CASE WHEN v_state = 'dead_lettered' THEN NULL ELSE now() END
             WHERE s.job_id = v_jobs[v_i]
               AND s.state IN ('held', 'released', 'dead_lettered')
               AND NOT (s.state = 'dead_lettered' AND v_state = 'dead_lettered')
            RETURNING s.workflow_id, s.name, s.on_failure INTO v_step;
        END IF;
        IF v_state IS NULL OR NOT FOUND OR v_state = 'dead_lettered' THEN
            v_i := v_i + 1;
            CONTINUE;
        END IF;
        IF v_step.on_failure THEN
            PERFORM awa.workflow_finish(v_step.workflow_id);
            v_i := v_i + 1;
            CONTINUE;
        END IF;
        IF v_state = 'completed' AND jsonb_typeof(v_adds[v_i]) = 'array'
           AND NOT EXISTS (SELECT 1 FROM awa.workflows w
                            WHERE w.workflow_id = v_step.workflow_id
                              AND w.cancel_reason IS NOT NULL) THEN
            -- Steps it added while it ran: written now, before its dependents are counted down.
            PERFORM awa.workflow_graft(v_step.workflow_id, v_step.name, v_adds[v_i]);
        END IF;
        UPDATE awa.workflows w
           SET unfinished = w.unfinished - 1,
               failures = w.failures + CASE WHEN v_state = 'completed' THEN 0 ELSE 1 END
         WHERE w.workflow_id = v_step.workflow_id
        RETURNING w.unfinished, w.cancel_reason, w.failures INTO v_wf;
        FOR v_dep IN
            SELECT t.job_id, t.name, e.ignore_failure
              FROM awa.workflow_edges e
              JOIN awa.workflow_steps t
                ON t.workflow_id = e.workflow_id AND t.name = e.to_step
             WHERE e.workflow_id = v_step.workflow_id AND e.from_step = v_step.name
               AND t.state = 'held'
             ORDER BY t.name
        LOOP
            IF v_wf.cancel_reason IS NOT NULL THEN
                -- The workflow was cancelled while this step was closing (awa.workflow_cancel
                -- left its attempt to this closer): nothing more is released.
                PERFORM awa.workflow_withdraw(v_dep.job_id, v_wf.cancel_reason);
                v_jobs := v_jobs || v_dep.job_id;
                v_outcomes := v_outcomes || 'cancelled'::text;
                v_errors := v_errors || jsonb_build_object('at', now(),
                                                           'reason', v_wf.cancel_reason);
                v_results := v_results || NULL::jsonb;
                v_adds := v_adds || NULL::jsonb;
            ELSIF v_state = 'completed' OR v_dep.ignore_failure THEN
                UPDATE awa.workflow_steps s SET remaining_deps = s.remaining_deps - 1
                 WHERE s.job_id = v_dep.job_id
                RETURNING s.remaining_deps INTO v_left;
                IF v_left = 0 THEN
                    v_release := v_release || v_dep.job_id;
                END IF;
            ELSE
                PERFORM awa.workflow_withdraw(v_dep.job_id, format(
                    'workflow step %s was cancelled: its dependency %s %s',
                    v_dep.name, v_step.name, v_state));
                v_jobs := v_jobs || v_dep.job_id;
                v_outcomes := v_outcomes || 'cancelled'::text;
                v_errors := v_errors || jsonb_build_object(
                    'at', now(), 'reason', format('dependency %s %s', v_step.name, v_state),
                    'dependency', v_step.name, 'dependency_state', v_state);
                v_results := v_results || NULL::jsonb;
                v_adds := v_adds || NULL::jsonb;
            END IF;
        END LOOP;
        IF v_wf.unfinished = 0 THEN
            v_handler := awa.workflow_settle(v_step.workflow_id, v_wf.failures,
                                             v_wf.cancel_reason);
            IF v_handler IS NOT NULL THEN
                v_release := v_release || v_handler;
            END IF;
        END IF;
        v_i := v_i + 1;
    END LOOP;
    PERFORM awa.workflow_release(v_release);
END
$$;

-- Deletes up to p_limit finished workflows, their steps and edges with them, once their
-- retention has passed (a completed one's p_completed_s, a failed or cancelled one's
-- p_failed_s, as the ring keeps their jobs); returns how many. The steps' job rows are the
-- ring's and go with its prune.
CREATE OR REPLACE FUNCTION awa.workflow_prune(p_completed_s double precision,
                                              p_failed_s double precision, p_limit integer)
RETURNS integer LANGUAGE sql AS $$
    WITH doomed AS (
        SELECT w.workflow_id FROM awa.workflows w
         WHERE w.finished_at < now() - make_interval(secs => least(p_completed_s, p_failed_s))
           AND w.finished_at < now() - make_interval(secs => CASE w.state
                   WHEN 'completed' THEN p_completed_s ELSE p_failed_s END)
         ORDER BY w.finished_at LIMIT p_limit FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM awa.workflows w USING doomed d WHERE w.workflow_id = d.workflow_id
        RETURNING 1
    )
    SELECT count(*)::integer FROM gone
$$;

-- Closes a batch of attempts in one statement and returns the attempts it actually closed, with
-- the time each retried or snoozed one runs again.
--
-- Guard (DESIGN.md §3 property 2): an item must match an existing receipt on
-- (job_id, run_lease), and the done_entries primary key lets only the first closer of an attempt
-- win. A completion for an older lease, or for an attempt already closed by rescue or cancel,
-- inserts nothing and is missing from the result: the caller reports it as stale.
-- Retryable and snoozed outcomes append the job to the deferred backlog in the same statement,
-- carrying its body from the retained ready row. A retry appends this attempt's error to the
-- job's error list; a snooze gives the attempt back. A snooze that carries an error is a try
-- the worker could not run (no handler for the job's kind: awa_django.core.unknown_kinds): it
-- gives the attempt back too, but waits as retryable with its error recorded, replacing the
-- job's last entry when that one is a try of the same wait (it has waiting_since), so the
-- errors grow by one entry per wait. A closed attempt's lease (if it had one) is deleted; its
-- progress and checkpoint are saved for the next attempt, or deleted when the job completed. A job that ended (completed, failed, cancelled) while a session waits on it
-- is announced on channel awa_job_done, with its id as payload, when the transaction commits.
--
-- p_batch is a JSON array with one object per attempt: its receipt address (ready_slot, queue,
-- priority, shard, lane_seq, job_id, run_lease), outcome, delay_s (retryable and snoozed only:
-- seconds from now until the job runs again), error, progress and checkpoint (objects, or null
-- when the attempt reported none) and result (a completed attempt's return value as JSON text,
-- or null). One JSON document rather than one array per field: the worker serializes it in one
-- C call, where dumping thirteen arrays element by element cost it about 6 µs per completion.
-- The time a job runs again is the database's, so a worker whose clock is off schedules it
-- no differently: statement_timestamp(), the time of the closing statement, which is now() for
-- a worker (autocommit) and the current time inside a closer's longer transaction (an external
-- callback, a test), as run_at was when the 0.1.0 worker sent it. That run_at (an absolute
-- time, the 0.1.0 workers' form of delay_s) is still read when delay_s is missing.
-- Plans: as awa.claim_ready's, for the same reasons. Every ring row is read through a LATERAL
-- ... LIMIT 1 probe of its primary key, one per batch item: as a plain join, a generic plan
-- made while the ring was small hashed the batch against every retained receipt, so each
-- close cost more the longer the ring had run (1.8 ms for 100 completions at 2,000 retained
-- receipts, 4.4 ms at 18,000).
CREATE OR REPLACE FUNCTION awa.close_batch(p_batch json)
RETURNS TABLE (job_id bigint, run_lease bigint, run_at timestamptz) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH batch AS (
        SELECT b.ready_slot, b.queue, b.priority, b.shard, b.lane_seq, b.job_id, b.run_lease,
               b.outcome,
               coalesce(statement_timestamp() + make_interval(secs => b.delay_s), b.run_at)
                 AS run_at,
               b.error, b.progress, b.checkpoint, b.result::jsonb AS result
          FROM json_to_recordset(p_batch)
            AS b(ready_slot integer, queue text, priority smallint, shard smallint,
                 lane_seq bigint, job_id bigint, run_lease bigint, outcome text,
                 delay_s double precision, run_at timestamptz, error jsonb, progress jsonb,
                 checkpoint jsonb, result text)
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
               CASE WHEN c.outcome = 'retryable' OR l.error IS NOT NULL THEN 'retryable'
                    ELSE 'scheduled' END,
               r.kind, r.queue, r.priority, r.args,
               CASE c.outcome WHEN 'snoozed' THEN c.attempt - 1 ELSE c.attempt END,
               c.run_lease, r.max_attempts, l.run_at, r.created_at, r.metadata, r.tags,
               CASE WHEN c.outcome = 'snoozed' AND l.error IS NOT NULL
                         AND r.errors -> -1 -> 'waiting_since' IS NOT NULL
                    THEN (r.errors - (-1)) || jsonb_build_array(l.error)
                    WHEN c.outcome = 'retryable' OR l.error IS NOT NULL
                    THEN r.errors || jsonb_build_array(l.error)
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
    SELECT c.job_id, c.run_lease, l.run_at
      FROM closed c
      JOIN live l ON l.job_id = c.job_id AND l.run_lease = c.run_lease;
    -- Tells the sessions waiting on a job (awa.job_waiters) that it ended. The table is empty
    -- unless someone waits, so a close that nobody waits on pays this one probe: a statement of
    -- its own, as a CTE of the one above cost more even when it found nobody. The attempts are
    -- read back from their done rows, which the statement above wrote (an attempt a rescue or
    -- cancel had closed first is announced again: its waiter only reads the state once more).
    IF EXISTS (SELECT 1 FROM awa.job_waiters) THEN
        PERFORM pg_notify('awa_job_done', d.job_id::text)
           FROM json_to_recordset(p_batch)
             AS b(ready_slot integer, job_id bigint, run_lease bigint)
           JOIN awa.done_entries d
             ON d.job_id = b.job_id AND d.run_lease = b.run_lease AND d.ready_slot = b.ready_slot
          WHERE d.outcome IN ('completed', 'failed', 'cancelled')
            AND EXISTS (SELECT 1 FROM awa.job_waiters w WHERE w.job_id = d.job_id);
    END IF;
    -- Workflow steps (functions/workflows.sql): their items carry "wf", so a batch of ordinary
    -- jobs pays one scan of its own text here and nothing more. A step's dependents are
    -- released, or cancelled, in this transaction. Its outcome is read back from its done row
    -- as for the waiters above; a flag seen in an error text only costs that read.
    IF strpos(p_batch::text, '"wf"') > 0 THEN
        PERFORM awa.workflow_steps_ended((
            SELECT jsonb_agg(jsonb_build_object('job_id', d.job_id, 'outcome', d.outcome,
                                                'error', d.error, 'result', d.result,
                                                'add', b.wf_add::jsonb)
                             ORDER BY d.job_id)
              FROM json_to_recordset(p_batch)
                AS b(ready_slot integer, job_id bigint, run_lease bigint, wf integer,
                     wf_add text)
              JOIN awa.done_entries d
                ON d.job_id = b.job_id AND d.run_lease = b.run_lease
               AND d.ready_slot = b.ready_slot
             WHERE b.wf IS NOT NULL));
    END IF;
END
$$;

-- The 0.1.0 form of awa.close_batch, without the times: 0.1.0 workers (whose batches carry run_at)
-- and awa.cancel_job call it.
