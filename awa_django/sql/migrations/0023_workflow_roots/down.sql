-- Reverses 0023: awa.workflow_create as 0013 defined it (every step written held, the roots
-- released through awa.workflow_release).

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
