-- Reverses 0023: awa.workflow_create as 0013 defined it (every step written held, the roots
-- released through awa.workflow_release) and awa.workflow_release as 0020 defined it (every
-- released step's inputs copied into its metadata); the functions 0023 added are dropped.

-- Creates a workflow from its validated description and returns each step's job id. p_spec:
-- {"name": text, "steps": [{"name", "kind", "queue", "priority", "args", "max_attempts",
-- "metadata", "tags", "after": [names], "ignore": [names], "on_failure": bool}, ...]}, in the
-- order the steps were added. Every step is written held; the steps without dependencies are
-- released at once, in this transaction, so the whole workflow commits or rolls back with the
-- caller's rows.
CREATE OR REPLACE FUNCTION awa.workflow_create(p_spec jsonb)
RETURNS TABLE (workflow_id bigint, step text, job_id bigint) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_id bigint := nextval('awa.workflow_id_seq');
    v_roots bigint[];
BEGIN
    INSERT INTO awa.workflows (workflow_id, name, state, steps, unfinished)
    SELECT v_id, p_spec ->> 'name', 'running', count(*),
           count(*) FILTER (WHERE NOT coalesce((s ->> 'on_failure')::boolean, false))
      FROM jsonb_array_elements(p_spec -> 'steps') s;
    INSERT INTO awa.workflow_steps (workflow_id, name, job_id, position, after, remaining_deps,
                                    on_failure, state)
    SELECT v_id, s.value ->> 'name', nextval('awa.job_id_seq'), s.ordinality,
           ARRAY(SELECT jsonb_array_elements_text(s.value -> 'after')),
           jsonb_array_length(s.value -> 'after'),
           coalesce((s.value ->> 'on_failure')::boolean, false), 'held'
      FROM jsonb_array_elements(p_spec -> 'steps') WITH ORDINALITY s
     ORDER BY s.ordinality;
    INSERT INTO awa.workflow_edges (workflow_id, from_step, to_step, ignore_failure)
    SELECT v_id, d.dep, s.value ->> 'name', (s.value -> 'ignore') ? d.dep
      FROM jsonb_array_elements(p_spec -> 'steps') s
     CROSS JOIN LATERAL jsonb_array_elements_text(s.value -> 'after') d(dep);
    INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                   run_lease, max_attempts, run_at, created_at, metadata, tags,
                                   errors)
    SELECT w.job_id, 'held', s.value ->> 'kind', s.value ->> 'queue',
           (s.value ->> 'priority')::smallint, s.value -> 'args', 0, 0,
           (s.value ->> 'max_attempts')::integer, now(), now(),
           coalesce(s.value -> 'metadata', '{}') || jsonb_build_object('awa:workflow',
               jsonb_build_object('id', v_id, 'name', p_spec ->> 'name', 'step', w.name,
                                  'after', s.value -> 'after')),
           ARRAY(SELECT jsonb_array_elements_text(coalesce(s.value -> 'tags', '[]'))), '[]'
      FROM jsonb_array_elements(p_spec -> 'steps') s
      JOIN awa.workflow_steps w ON w.workflow_id = v_id AND w.name = s.value ->> 'name';
    v_roots := ARRAY(SELECT w.job_id FROM awa.workflow_steps w
                      WHERE w.workflow_id = v_id AND w.remaining_deps = 0 AND NOT w.on_failure
                      ORDER BY w.position);
    PERFORM awa.workflow_release(v_roots);
    RETURN QUERY SELECT w.workflow_id, w.name, w.job_id FROM awa.workflow_steps w
                  WHERE w.workflow_id = v_id ORDER BY w.position;
END
$$;

-- Moves held steps into the ready ring (awa.ready_deferred), each with what it reads of the
-- steps before it written into its metadata under awa:workflow.inputs: per dependency its
-- state, result and error; an on_failure step gets every step that did not complete. Steps no
-- longer held (cancelled meanwhile) are left alone. The caller holds the workflows' locks.
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
        RETURNING s.workflow_id, s.name, s.job_id, s.on_failure, s.after
    ), inputs AS (
        -- A step's dependencies are found from its edges, so releasing n steps reads their
        -- edges only; filtering every step of the workflow per released step read n x steps
        -- rows (a 10,000-root chord took minutes to start).
        SELECT r.job_id, r.after, coalesce(CASE WHEN r.on_failure THEN (
            SELECT jsonb_object_agg(p.name, jsonb_build_object(
                       'state', p.state, 'result', p.result, 'error', p.error))
              FROM awa.workflow_steps p
             WHERE p.workflow_id = r.workflow_id
               AND p.state IN ('failed', 'cancelled', 'dead_lettered'))
            ELSE (
            SELECT jsonb_object_agg(p.name, jsonb_build_object(
                       'state', p.state, 'result', p.result, 'error', p.error))
              FROM awa.workflow_edges e
              JOIN awa.workflow_steps p
                ON p.workflow_id = e.workflow_id AND p.name = e.from_step
             WHERE e.workflow_id = r.workflow_id AND e.to_step = r.name) END, '{}') AS inputs
          FROM released r
    ), moved AS (
        UPDATE awa.deferred_jobs d
           SET metadata = jsonb_set(jsonb_set(d.metadata, '{awa:workflow,inputs}', i.inputs),
                                    '{awa:workflow,after}', to_jsonb(i.after))
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

DROP FUNCTION IF EXISTS awa.workflow_step_inputs(bigint, text);
DROP FUNCTION IF EXISTS awa.workflow_inputs_copied();
