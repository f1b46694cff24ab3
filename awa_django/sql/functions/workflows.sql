-- Durable workflows (docs/workflows.md).
-- Current definitions, CREATE OR REPLACE only, applied by migration 0013_workflows and again by
-- each later migration that changes one of them (docs/architecture.md, "SQL layout and schema
-- changes").
--
-- A step is an ordinary job. A step with dependencies is created 'held' in awa.deferred_jobs,
-- where no promoter looks (one without is written into the ready ring at once), and moved into
-- the ready ring by awa.workflow_release inside the transaction that ends its
-- last dependency: its remaining_deps counter is decremented under that workflow's transaction
-- lock, so of two completions committing at the same instant exactly one sees it reach zero.
-- Nothing polls. A job that is not a step never reaches these functions: awa.close_batch calls
-- awa.workflow_steps_ended only for batches whose items carry the "wf" flag.

-- The transaction lock that serializes the bookkeeping of one workflow (class 'AWAW'). Taken
-- in workflow id order by every function below before it touches a workflow's rows, so two
-- transactions that end steps of the same workflows never deadlock.
CREATE OR REPLACE FUNCTION awa.workflow_lock(p_workflow_id bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(1096237399, (p_workflow_id % 2147483647)::integer)
$$;

-- Creates a workflow from its validated description and returns each step's job id. p_spec:
-- {"name": text, "steps": [{"name", "kind", "queue", "priority", "args", "max_attempts",
-- "metadata", "tags", "after": [names], "ignore": [names], "on_failure": bool}, ...]}, in the
-- order the steps were added. The spec is read once (jsonb_to_recordset) and every table is
-- written from that one reading in one statement. A step without dependencies (no on_failure
-- step) is written straight into the ready ring, released, with empty inputs: it reads nothing
-- of other steps, so the detour through awa.deferred_jobs and awa.workflow_release (a held row
-- written, updated, deleted) bought nothing. The others are written held. The whole workflow
-- commits or rolls back with the caller's rows.
CREATE OR REPLACE FUNCTION awa.workflow_create(p_spec jsonb)
RETURNS TABLE (workflow_id bigint, step text, job_id bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id bigint := nextval('awa.workflow_id_seq');
    v_name text := p_spec ->> 'name';
    v_slot record := awa.producer_slot();
BEGIN
    RETURN QUERY
    WITH parsed AS MATERIALIZED (
        -- Job ids in step order: the steps' ids increase as they were added.
        SELECT nextval('awa.job_id_seq') AS job_id, o.*,
               cardinality(o.after) = 0 AND NOT o.on_failure AS root
          FROM (SELECT x.ordinality::integer AS position, x.name, x.kind, x.queue, x.priority,
                       x.args, x.max_attempts, coalesce(x.metadata, '{}') AS metadata,
                       coalesce(x.tags, '{}') AS tags, coalesce(x.after, '{}') AS after,
                       coalesce(x.ignore, '{}') AS ignore,
                       coalesce(x.on_failure, false) AS on_failure
                  FROM ROWS FROM (jsonb_to_recordset(p_spec -> 'steps') AS (
                       name text, kind text, queue text, priority smallint, args jsonb,
                       max_attempts integer, metadata jsonb, tags text[], after text[],
                       ignore text[], on_failure boolean)) WITH ORDINALITY AS x
                 ORDER BY x.ordinality) o
    ), jobs AS MATERIALIZED (
        SELECT p.*, p.metadata || jsonb_build_object('awa:workflow', CASE WHEN p.root
                   THEN jsonb_build_object('id', v_id, 'name', v_name, 'step', p.name,
                                           'after', '[]'::jsonb, 'inputs', '{}'::jsonb)
                   WHEN cardinality(p.after) > awa.workflow_inputs_copied()
                   THEN jsonb_build_object('id', v_id, 'name', v_name, 'step', p.name,
                                           'inputs_read', true)
                   ELSE jsonb_build_object('id', v_id, 'name', v_name, 'step', p.name,
                                           'after', to_jsonb(p.after)) END) AS full_metadata,
               CASE WHEN p.root THEN awa.reentry_shard(p.queue, p.metadata) END AS shard
          FROM parsed p
    ), flow AS (
        INSERT INTO awa.workflows (workflow_id, name, state, steps, unfinished)
        SELECT v_id, v_name, 'running', count(*), count(*) FILTER (WHERE NOT p.on_failure)
          FROM parsed p
    ), steps AS (
        INSERT INTO awa.workflow_steps (workflow_id, name, job_id, position, after,
                                        remaining_deps, on_failure, state, released_at)
        SELECT v_id, p.name, p.job_id, p.position, p.after, cardinality(p.after), p.on_failure,
               CASE WHEN p.root THEN 'released' ELSE 'held' END,
               CASE WHEN p.root THEN now() END
          FROM parsed p
    ), edges AS (
        INSERT INTO awa.workflow_edges (workflow_id, from_step, to_step, ignore_failure)
        SELECT v_id, d.dep, p.name, d.dep = ANY (p.ignore)
          FROM parsed p CROSS JOIN LATERAL unnest(p.after) d(dep)
    ), held AS (
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        SELECT j.job_id, 'held', j.kind, j.queue, j.priority, j.args, 0, 0, j.max_attempts,
               now(), now(), j.full_metadata, j.tags, '[]'
          FROM jobs j WHERE NOT j.root
    ), numbered AS (
        -- As awa.ready_deferred numbers what it moves: each lane's rows in job id order, the
        -- first of them announcing the lane.
        SELECT j.*,
               row_number() OVER (PARTITION BY j.queue, j.priority, j.shard
                                  ORDER BY j.job_id) = 1 AS announce,
               row_number() OVER (ORDER BY j.queue, j.priority, j.shard, j.job_id) AS lane_pos
          FROM jobs j WHERE j.root
    ), seqs AS MATERIALIZED (
        SELECT n.job_id, nextval('awa.lane_seq') AS lane_seq
          FROM (SELECT n.job_id FROM numbered n ORDER BY n.lane_pos) n
    ), ready AS (
        INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                       ready_generation, job_id, kind, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors, announce)
        SELECT n.queue, n.priority, n.shard, q.lane_seq, v_slot.slot, v_slot.generation,
               n.job_id, n.kind, n.args, 0, 0, n.max_attempts, now(), now(), n.full_metadata,
               n.tags, '[]', n.announce
          FROM numbered n JOIN seqs q ON q.job_id = n.job_id
    )
    SELECT v_id, p.name, p.job_id FROM parsed p ORDER BY p.position;
END
$$;

-- How many dependencies a step may have and still get their results copied into its metadata
-- at release. A step with more (a wide chord's callback) reads them when it runs instead, by
-- its workflow and name (awa:workflow.inputs_read): the transaction of the last member's
-- completion then writes one small row for it, not an aggregate of every member's result, and
-- its claim moves a small row.
CREATE OR REPLACE FUNCTION awa.workflow_inputs_copied() RETURNS integer
LANGUAGE sql IMMUTABLE AS 'SELECT 64';

-- Moves held steps into the ready ring (awa.ready_deferred), each with what it reads of the
-- steps before it written into its metadata under awa:workflow.inputs: per dependency its
-- state, result and error; an on_failure step gets every step that did not complete. A step
-- with more dependencies than awa.workflow_inputs_copied() gets none of it, only the flag
-- awa:workflow.inputs_read (and no "after" list): it reads both when it runs. Steps no longer
-- held (cancelled meanwhile) are left alone. The caller holds the workflows' locks.
CREATE OR REPLACE FUNCTION awa.workflow_release(p_job_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
BEGIN
    IF cardinality(p_job_ids) = 0 THEN
        RETURN;
    END IF;
    WITH released AS (
        UPDATE awa.workflow_steps s SET state = 'released', released_at = now()
         WHERE s.job_id = ANY (p_job_ids) AND s.state = 'held'
        RETURNING s.workflow_id, s.name, s.job_id, s.on_failure, s.after,
                  NOT s.on_failure AND cardinality(s.after) > awa.workflow_inputs_copied()
                      AS read_at_run
    ), inputs AS (
        -- A step's dependencies are found from its edges, so releasing n steps reads their
        -- edges only; filtering every step of the workflow per released step read n x steps
        -- rows (a 10,000-root chord took minutes to start).
        SELECT r.job_id, r.after, r.read_at_run, CASE WHEN r.read_at_run THEN NULL
            WHEN r.on_failure THEN coalesce((
            SELECT jsonb_object_agg(p.name, jsonb_build_object(
                       'state', p.state, 'result', p.result, 'error', p.error))
              FROM awa.workflow_steps p
             WHERE p.workflow_id = r.workflow_id
               AND p.state IN ('failed', 'cancelled', 'dead_lettered')), '{}')
            ELSE coalesce((
            SELECT jsonb_object_agg(p.name, jsonb_build_object(
                       'state', p.state, 'result', p.result, 'error', p.error))
              FROM awa.workflow_edges e
              JOIN awa.workflow_steps p
                ON p.workflow_id = e.workflow_id AND p.name = e.from_step
             WHERE e.workflow_id = r.workflow_id AND e.to_step = r.name), '{}') END AS inputs
          FROM released r
    ), moved AS (
        UPDATE awa.deferred_jobs d
           SET metadata = CASE WHEN i.read_at_run
                   -- Its "after" may have grown (awa.workflow_graft) past the limit since
                   -- it was created: the list goes, the flag comes.
                   THEN jsonb_set(d.metadata #- '{awa:workflow,after}',
                                  '{awa:workflow,inputs_read}', 'true')
                   ELSE jsonb_set(jsonb_set(d.metadata, '{awa:workflow,inputs}', i.inputs),
                                  '{awa:workflow,after}', to_jsonb(i.after)) END
          FROM inputs i
         WHERE d.job_id = i.job_id AND d.state = 'held'
        RETURNING d.job_id
    )
    SELECT array_agg(m.job_id ORDER BY m.job_id) INTO v_ids FROM moved m;
    IF v_ids IS NOT NULL THEN
        PERFORM awa.ready_deferred(v_ids);
    END IF;
END
$$;

-- What a step flagged awa:workflow.inputs_read reads when it runs: its dependencies in order
-- ("after", grown by awa.workflow_graft as it may be) and each one's state, result and error.
CREATE OR REPLACE FUNCTION awa.workflow_step_inputs(p_workflow_id bigint, p_step text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('after', to_jsonb(s.after), 'inputs', coalesce((
               SELECT jsonb_object_agg(p.name, jsonb_build_object(
                          'state', p.state, 'result', p.result, 'error', p.error))
                 FROM awa.workflow_edges e
                 JOIN awa.workflow_steps p
                   ON p.workflow_id = e.workflow_id AND p.name = e.from_step
                WHERE e.workflow_id = s.workflow_id AND e.to_step = s.name), '{}'))
      FROM awa.workflow_steps s
     WHERE s.workflow_id = p_workflow_id AND s.name = p_step
$$;

-- Withdraws a held step: its deferred row becomes a ready row that is never published, with a
-- tombstone (as awa.cancel_job records a cancelled scheduled job), so the job reads as
-- cancelled with p_reason. Returns whether it was still held.
CREATE OR REPLACE FUNCTION awa.workflow_withdraw(p_job_id bigint, p_reason text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_row record;
    v_lane record;
    v_seq bigint;
BEGIN
    DELETE FROM awa.deferred_jobs d WHERE d.job_id = p_job_id AND d.state = 'held'
    RETURNING d.* INTO v_row;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
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
    PERFORM awa.notify_job_waiters(p_job_id);
    RETURN true;
END
$$;

-- Adds the steps p_parent added while it ran (ctx.workflow.add), as it completes: p_steps is a
-- JSON array of step descriptions as awa.workflow_create reads them, named "<parent>/<name>",
-- each waiting for p_parent and its own "after". Every step that waits for p_parent waits for
-- them too (their remaining_deps and "after" grow), so a fan-in after a fan-out sized at run
-- time reads all of its results. The caller holds the workflow's lock and counts p_parent's
-- dependents down next, the new steps among them.
CREATE OR REPLACE FUNCTION awa.workflow_graft(p_workflow_id bigint, p_parent text, p_steps jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_names text[];
    v_count integer := jsonb_array_length(p_steps);
    v_base integer;
BEGIN
    v_names := ARRAY(SELECT s ->> 'name' FROM jsonb_array_elements(p_steps) s);
    SELECT max(w.position) INTO v_base FROM awa.workflow_steps w
     WHERE w.workflow_id = p_workflow_id;
    -- The parent's dependents from before the graft gain the new steps as dependencies.
    WITH grown AS (
        UPDATE awa.workflow_steps t
           SET remaining_deps = t.remaining_deps + v_count, after = t.after || v_names
          FROM awa.workflow_edges e
         WHERE e.workflow_id = p_workflow_id AND e.from_step = p_parent
           AND t.workflow_id = e.workflow_id AND t.name = e.to_step AND t.state = 'held'
        RETURNING t.name, e.ignore_failure
    ), new_steps AS (
        INSERT INTO awa.workflow_steps (workflow_id, name, job_id, position, after,
                                        remaining_deps, on_failure, state)
        SELECT p_workflow_id, s.value ->> 'name', nextval('awa.job_id_seq'),
               v_base + s.ordinality::integer,
               p_parent || ARRAY(SELECT jsonb_array_elements_text(s.value -> 'after')),
               1 + jsonb_array_length(s.value -> 'after'), false, 'held'
          FROM jsonb_array_elements(p_steps) WITH ORDINALITY s
        RETURNING name
    )
    INSERT INTO awa.workflow_edges (workflow_id, from_step, to_step, ignore_failure)
    SELECT p_workflow_id, n.name, g.name, g.ignore_failure
      FROM grown g CROSS JOIN new_steps n;
    INSERT INTO awa.workflow_edges (workflow_id, from_step, to_step, ignore_failure)
    SELECT p_workflow_id, p_parent, s ->> 'name', false
      FROM jsonb_array_elements(p_steps) s
    UNION ALL
    SELECT p_workflow_id, d.dep, s ->> 'name', false
      FROM jsonb_array_elements(p_steps) s
     CROSS JOIN LATERAL jsonb_array_elements_text(s -> 'after') d(dep);
    INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                   run_lease, max_attempts, run_at, created_at, metadata, tags,
                                   errors)
    SELECT w.job_id, 'held', s ->> 'kind', s ->> 'queue', (s ->> 'priority')::smallint,
           s -> 'args', 0, 0, (s ->> 'max_attempts')::integer, now(), now(),
           coalesce(s -> 'metadata', '{}') || jsonb_build_object('awa:workflow',
               jsonb_build_object('id', p_workflow_id, 'name', f.name, 'step', w.name,
                                  'after', to_jsonb(w.after))),
           ARRAY(SELECT jsonb_array_elements_text(coalesce(s -> 'tags', '[]'))), '[]'
      FROM jsonb_array_elements(p_steps) s
      JOIN awa.workflow_steps w ON w.workflow_id = p_workflow_id AND w.name = s ->> 'name'
      JOIN awa.workflows f ON f.workflow_id = p_workflow_id;
    UPDATE awa.workflows w
       SET steps = w.steps + v_count, unfinished = w.unfinished + v_count
     WHERE w.workflow_id = p_workflow_id;
END
$$;

-- Gives a workflow whose steps have all ended its terminal state, once: cancelled when it was
-- cancelled, failed when a step did not complete, completed otherwise. Its waiters are told
-- on channel awa_workflow_done at commit. It is also added to the transaction's setting
-- awa.workflows_finished (a JSON array of {id, name, state}), which the worker's close
-- statement and cancel_workflow read to send the workflow_finished signal after commit.
CREATE OR REPLACE FUNCTION awa.workflow_finish(p_workflow_id bigint) RETURNS void
LANGUAGE sql AS $$
    WITH finished AS (
        UPDATE awa.workflows w
           SET state = CASE WHEN w.cancel_reason IS NOT NULL THEN 'cancelled'
                            WHEN w.failures > 0 THEN 'failed' ELSE 'completed' END,
               finished_at = now()
         WHERE w.workflow_id = p_workflow_id AND w.state = 'running'
           -- A retried step (awa.workflow_step_retried) may have made it unfinished again
           -- while its on_failure step was running: it finishes when that step ends.
           AND w.unfinished = 0
        RETURNING w.workflow_id, w.name, w.state
    )
    SELECT pg_notify('awa_workflow_done', f.workflow_id::text),
           set_config('awa.workflows_finished',
                      (coalesce(nullif(current_setting('awa.workflows_finished', true), ''),
                                '[]')::jsonb
                       || jsonb_build_array(jsonb_build_object(
                              'id', f.workflow_id, 'name', f.name, 'state', f.state)))::text,
                      true)
      FROM finished f
$$;

-- What follows when a workflow's last unfinished step ended (the caller holds its lock): no
-- held on_failure step: it finishes; one, and a step did not complete: that step is returned,
-- for the caller to release; one, and nothing failed or the workflow was cancelled: it is
-- withdrawn as not needed (skipped) and the workflow finishes.
CREATE OR REPLACE FUNCTION awa.workflow_settle(p_workflow_id bigint, p_failures integer,
                                               p_cancel_reason text)
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_handler bigint;
BEGIN
    SELECT s.job_id INTO v_handler FROM awa.workflow_steps s
     WHERE s.workflow_id = p_workflow_id AND s.on_failure AND s.state = 'held';
    IF NOT FOUND THEN
        PERFORM awa.workflow_finish(p_workflow_id);
        RETURN NULL;
    ELSIF p_failures > 0 AND p_cancel_reason IS NULL THEN
        RETURN v_handler;
    END IF;
    PERFORM awa.workflow_withdraw(v_handler, CASE
        WHEN p_cancel_reason IS NOT NULL THEN 'workflow cancelled: ' || p_cancel_reason
        ELSE 'workflow completed: on_failure step not needed' END);
    UPDATE awa.workflow_steps s SET state = 'skipped', finished_at = now()
     WHERE s.job_id = v_handler;
    PERFORM awa.workflow_finish(p_workflow_id);
    RETURN NULL;
END
$$;

-- Records that steps ended and does what follows, in the caller's transaction. p_ended is a
-- JSON array of {job_id, outcome, error, result, workflow_id}, outcome as awa.done_entries has
-- it, workflow_id optional (the step's workflow, when its closer knows it); items
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
    v_workflows bigint[];
    v_cancelled bigint[];
    v_linked bigint[];
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
    -- Each item's workflow: the one its closer read from the step's metadata (written by
    -- awa.workflow_create and awa.workflow_graft), or looked up by its job.
    v_workflows := ARRAY(
        SELECT DISTINCT w.id
          FROM jsonb_to_recordset(p_ended) AS e(job_id bigint, workflow_id bigint)
         CROSS JOIN LATERAL (SELECT coalesce(e.workflow_id, (
                   SELECT s.workflow_id FROM awa.workflow_steps s
                    WHERE s.job_id = e.job_id)) AS id) w
         WHERE w.id IS NOT NULL ORDER BY 1);
    PERFORM awa.workflow_lock(w.id) FROM unnest(v_workflows) WITH ORDINALITY w(id, n)
     ORDER BY w.n;
    -- Read once per batch, under the locks (awa.workflow_cancel sets it under the lock), not
    -- once per step by the update below.
    v_cancelled := ARRAY(SELECT w.workflow_id FROM awa.workflows w
                          WHERE w.workflow_id = ANY (v_workflows)
                            AND w.cancel_reason IS NOT NULL);
    -- The workflows with any edge: the steps of the others (a group) have no dependents to
    -- look up, step by step, below.
    v_linked := ARRAY(SELECT w.id FROM unnest(v_workflows) w(id)
                       WHERE EXISTS (SELECT 1 FROM awa.workflow_edges e
                                      WHERE e.workflow_id = w.id));
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
           AND NOT s.on_failure AND s.workflow_id <> ALL (v_cancelled)
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
                 WHERE d.workflow_id = ANY (v_linked)
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

-- Cancels one step's job for awa.workflow_cancel without waiting for another closer of the
-- same attempt: that closer (a worker, the rescue, a callback) takes the workflow's lock next,
-- which awa.workflow_cancel may hold, so waiting for it could deadlock. Each try waits at most
-- lock_timeout; a job still waiting in the backlog or its lane (its promotion or a claim held
-- a lock a moment) is tried again. Returns awa.cancel_job's outcome, or 'in_flight' when
-- another closer is writing the attempt's end: that closer does the step's bookkeeping after
-- this transaction commits, and finds the workflow cancelled.
CREATE OR REPLACE FUNCTION awa.workflow_cancel_step(p_job_id bigint, p_reason text)
RETURNS text LANGUAGE plpgsql SET lock_timeout = '100ms' AS $$
DECLARE
    v_try integer := 1;
BEGIN
    LOOP
        BEGIN
            RETURN awa.cancel_job(p_job_id, p_reason);
        EXCEPTION WHEN lock_not_available THEN
            IF v_try >= 5 OR NOT EXISTS (
                    SELECT 1 FROM awa.jobs j
                     WHERE j.job_id = p_job_id
                       AND j.state IN ('available', 'scheduled', 'retryable')) THEN
                RETURN 'in_flight';
            END IF;
            v_try := v_try + 1;
        END;
    END LOOP;
END
$$;

-- Cancels a workflow: every step not ended yet is cancelled with p_reason (a running one's
-- worker is told, as by awa.cancel_job, and its handler sees ctx.is_cancelled()), a step
-- parked in the dead-letter queue is recorded as cancelled (its DLQ entry stays for the
-- operator), and the workflow ends 'cancelled' once its last step has ended; the on_failure
-- step does not run. Returns how many steps it cancelled, or NULL when there is no such
-- workflow or it has already finished.
--
-- Lock order, the same as a closer's (awa.close_batch: an attempt's closure, then the
-- workflow's lock): the released steps' attempts are closed first, without the workflow's
-- lock, their bookkeeping held back (awa.workflow_hold); then, under the lock, the workflow is
-- marked cancelled, that bookkeeping done, and the held steps withdrawn. A step released by a
-- closer that committed between the two is cancelled under the lock without waiting for any
-- closer of its attempt (awa.workflow_cancel_step): one writing it now waits for this lock,
-- and once this transaction commits it finds the workflow cancelled and releases nothing
-- (awa.workflow_steps_ended).
CREATE OR REPLACE FUNCTION awa.workflow_cancel(p_workflow_id bigint, p_reason text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_step record;
    v_count integer := 0;
    v_outcome text;
    v_state text;
    v_unfinished bigint[];
    v_ended jsonb := '[]';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM awa.workflows w
                    WHERE w.workflow_id = p_workflow_id AND w.state = 'running') THEN
        RETURN NULL;
    END IF;
    v_unfinished := ARRAY(SELECT s.job_id FROM awa.workflow_steps s
                           WHERE s.workflow_id = p_workflow_id AND NOT s.on_failure
                             AND s.state IN ('held', 'released', 'dead_lettered'));
    PERFORM set_config('awa.workflow_hold', 'on', true);
    FOR v_step IN
        SELECT s.job_id FROM awa.workflow_steps s
         WHERE s.workflow_id = p_workflow_id AND s.state = 'released' ORDER BY s.job_id
    LOOP
        PERFORM awa.workflow_cancel_step(v_step.job_id, p_reason);
    END LOOP;
    PERFORM set_config('awa.workflow_hold', 'off', true);
    PERFORM awa.workflow_lock(p_workflow_id);
    UPDATE awa.workflows w SET cancel_reason = p_reason
     WHERE w.workflow_id = p_workflow_id AND w.state = 'running';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The released steps cancelled above (their jobs now read cancelled), by job id.
    FOR v_step IN
        SELECT s.job_id FROM awa.workflow_steps s
         WHERE s.workflow_id = p_workflow_id AND s.state = 'released' ORDER BY s.job_id
    LOOP
        SELECT j.state INTO v_state FROM awa.jobs j WHERE j.job_id = v_step.job_id;
        IF v_state = 'cancelled' THEN
            v_ended := v_ended || jsonb_build_object(
                'job_id', v_step.job_id, 'outcome', 'cancelled',
                'error', jsonb_build_object('at', now(), 'reason', p_reason));
        END IF;
    END LOOP;
    PERFORM awa.workflow_steps_ended(v_ended);
    FOR v_step IN
        SELECT s.job_id, s.name FROM awa.workflow_steps s
         WHERE s.workflow_id = p_workflow_id
           AND s.state IN ('held', 'released', 'dead_lettered')
         ORDER BY s.on_failure, s.position
    LOOP
        -- A step this loop cancelled already cancelled its dependents in turn.
        IF NOT EXISTS (SELECT 1 FROM awa.workflow_steps s
                        WHERE s.job_id = v_step.job_id
                          AND s.state IN ('held', 'released', 'dead_lettered')) THEN
            CONTINUE;
        END IF;
        -- A held step is withdrawn (no closer can hold it: only a release, under this lock,
        -- moves it); a released one is cancelled without waiting for another closer.
        v_outcome := awa.workflow_cancel_step(v_step.job_id, p_reason);
        IF v_outcome NOT LIKE 'cancelled%' AND EXISTS (
                SELECT 1 FROM awa.workflow_steps s
                 WHERE s.job_id = v_step.job_id AND s.state = 'dead_lettered') THEN
            PERFORM awa.workflow_steps_ended(jsonb_build_array(jsonb_build_object(
                'job_id', v_step.job_id, 'outcome', 'cancelled',
                'error', jsonb_build_object('at', now(), 'reason', p_reason))));
        END IF;
    END LOOP;
    -- Counted at the end: cancelling a step cancels its dependents with it.
    SELECT count(*) INTO v_count FROM awa.workflow_steps s
     WHERE s.workflow_id = p_workflow_id AND s.state = 'cancelled'
       AND s.job_id = ANY (v_unfinished);
    RETURN v_count;
END
$$;

-- Deletes up to p_limit finished workflows, their steps and edges with them, once their
-- retention has passed (a completed one's p_completed_s, a failed or cancelled one's
-- p_failed_s, as the ring keeps their jobs); returns how many. The steps' job rows are the
-- ring's and go with its prune. The steps and edges are deleted here, not by foreign keys:
-- those checked the workflow's row for every step and edge written (migration 0030).
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
        RETURNING w.workflow_id
    ), steps AS (
        DELETE FROM awa.workflow_steps s USING gone g WHERE s.workflow_id = g.workflow_id
    ), edges AS (
        DELETE FROM awa.workflow_edges e USING gone g WHERE e.workflow_id = g.workflow_id
    )
    SELECT count(*)::integer FROM gone
$$;

-- What awa.cancel_job does after it cancelled a job that had not started: when the job is a
-- workflow step, its dependents are cancelled in turn. One index probe for any other job.
CREATE OR REPLACE FUNCTION awa.workflow_job_cancelled(p_job_id bigint, p_reason text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM awa.workflow_steps s WHERE s.job_id = p_job_id) THEN
        PERFORM awa.workflow_steps_ended(jsonb_build_array(jsonb_build_object(
            'job_id', p_job_id, 'outcome', 'cancelled',
            'error', jsonb_build_object('at', now(), 'reason', p_reason))));
    END IF;
END
$$;

-- A step that had failed for good was put back to run again (awa.retry, awa.dlq.retry; called
-- by awa.workflow_dead_letter_gone in the retrying transaction). Its workflow leaves its
-- failed state: the step is released again, and the steps cancelled because of it are held
-- again, and so on down the graph (a dependent cancelled because its dependency X was
-- cancelled is restored when X is), except a step that another dependency, failed or
-- cancelled meanwhile and not ignored, would cancel anyway. Dependents that ignored the
-- failure and ran keep their run; held ones wait for the step again. An on_failure step that
-- ran stays as it is (it runs at most once). Returns whether the workflow resumed: not for a
-- job that is no step, a step not 'failed', an on_failure step, or a cancelled workflow.
CREATE OR REPLACE FUNCTION awa.workflow_step_retried(p_job_id bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_step record;
    v_restored text[];
    v_i integer := 1;
    v_dep record;
BEGIN
    SELECT s.workflow_id, s.name INTO v_step FROM awa.workflow_steps s
     WHERE s.job_id = p_job_id AND s.state = 'failed' AND NOT s.on_failure;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM awa.workflow_lock(v_step.workflow_id);
    IF EXISTS (SELECT 1 FROM awa.workflows w
                WHERE w.workflow_id = v_step.workflow_id AND w.cancel_reason IS NOT NULL) THEN
        RETURN false;
    END IF;
    UPDATE awa.workflow_steps s
       SET state = 'released', released_at = now(), finished_at = NULL, result = NULL,
           error = NULL
     WHERE s.job_id = p_job_id AND s.state = 'failed';
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    -- Held dependents that ignore its failure were counted down by it: they wait for it again.
    UPDATE awa.workflow_steps t SET remaining_deps = t.remaining_deps + 1
      FROM awa.workflow_edges e
     WHERE e.workflow_id = v_step.workflow_id AND e.from_step = v_step.name
       AND e.ignore_failure AND t.workflow_id = e.workflow_id AND t.name = e.to_step
       AND t.state = 'held';
    v_restored := ARRAY[v_step.name];
    WHILE v_i <= cardinality(v_restored) LOOP
        FOR v_dep IN
            SELECT t.name, t.job_id
              FROM awa.workflow_edges e
              JOIN awa.workflow_steps t
                ON t.workflow_id = e.workflow_id AND t.name = e.to_step
             WHERE e.workflow_id = v_step.workflow_id AND e.from_step = v_restored[v_i]
               AND NOT e.ignore_failure AND t.state = 'cancelled'
               AND t.error ->> 'dependency' = v_restored[v_i]
               AND NOT EXISTS (
                   SELECT 1 FROM awa.workflow_edges o
                     JOIN awa.workflow_steps p
                       ON p.workflow_id = o.workflow_id AND p.name = o.from_step
                    WHERE o.workflow_id = t.workflow_id AND o.to_step = t.name
                      AND NOT o.ignore_failure AND p.state IN ('failed', 'cancelled'))
             ORDER BY t.position
        LOOP
            -- Held again, as a newer fact of the job than its withdrawn ready row.
            INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                           run_lease, max_attempts, run_at, created_at,
                                           metadata, tags, errors)
            SELECT j.job_id, 'held', j.kind, j.queue, j.priority, j.args, 0, j.run_lease + 1,
                   j.max_attempts, now(), j.created_at, j.metadata, j.tags, j.errors
              FROM awa.jobs j WHERE j.job_id = v_dep.job_id;
            DELETE FROM awa.terminal_history h WHERE h.job_id = v_dep.job_id;
            UPDATE awa.workflow_steps t
               SET state = 'held', error = NULL, finished_at = NULL, released_at = NULL,
                   remaining_deps = (
                       SELECT count(*) FROM awa.workflow_edges o
                         JOIN awa.workflow_steps p
                           ON p.workflow_id = o.workflow_id AND p.name = o.from_step
                        WHERE o.workflow_id = t.workflow_id AND o.to_step = t.name
                          AND NOT (p.state = 'completed'
                                   OR (o.ignore_failure AND p.state IN ('failed', 'cancelled'))))
             WHERE t.job_id = v_dep.job_id;
            v_restored := v_restored || v_dep.name;
        END LOOP;
        v_i := v_i + 1;
    END LOOP;
    UPDATE awa.workflows w
       SET state = 'running', finished_at = NULL,
           unfinished = w.unfinished + cardinality(v_restored),
           failures = w.failures - cardinality(v_restored)
     WHERE w.workflow_id = v_step.workflow_id;
    RETURN true;
END
$$;

-- A workflow step's DLQ entry was deleted (trigger workflow_dead_letter_gone, at commit): a
-- retry put the job back (a newer ready row, or a deferred one), and its workflow resumes when
-- it ends; otherwise an operator purge or the DLQ retention gave it up, and the step fails for
-- good, cancelling its dependents as any failure does.
CREATE OR REPLACE FUNCTION awa.workflow_dead_letter_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM awa.dlq_entries q WHERE q.job_id = OLD.job_id) THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.job_id = OLD.job_id)
       OR EXISTS (SELECT 1 FROM awa.ready_entries r
                   WHERE r.job_id = OLD.job_id AND r.run_lease >= OLD.original_run_lease) THEN
        -- Retried. A dead-lettered step resumes by itself when the job ends; one that had
        -- failed for good (awa.retry moved it here) takes its workflow out of failure.
        PERFORM awa.workflow_step_retried(OLD.job_id);
        RETURN NULL;
    END IF;
    PERFORM awa.workflow_steps_ended(jsonb_build_array(jsonb_build_object(
        'job_id', OLD.job_id, 'outcome', 'failed',
        'error', coalesce(OLD.errors -> -1, '{}') || jsonb_build_object(
            'reason', 'dead-lettered step given up (' || OLD.dlq_reason || ')'))));
    RETURN NULL;
END
$$;
