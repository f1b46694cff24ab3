-- Reverse of migration 0016_flows2: awa.workflow_step_retried goes, and the workflow
-- functions it changed are restored as migration 0013 applied them.
DROP FUNCTION IF EXISTS awa.workflow_step_retried(bigint);
DROP FUNCTION IF EXISTS awa.workflow_cancel_step(bigint, text);
CREATE OR REPLACE FUNCTION awa.workflow_finish(p_workflow_id bigint) RETURNS void
LANGUAGE sql AS $$
    WITH finished AS (
        UPDATE awa.workflows w
           SET state = CASE WHEN w.cancel_reason IS NOT NULL THEN 'cancelled'
                            WHEN w.failures > 0 THEN 'failed' ELSE 'completed' END,
               finished_at = now()
         WHERE w.workflow_id = p_workflow_id AND w.state = 'running'
        RETURNING w.workflow_id
    )
    SELECT pg_notify('awa_workflow_done', f.workflow_id::text) FROM finished f
$$;
CREATE OR REPLACE FUNCTION awa.workflow_dead_letter_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM awa.dlq_entries q WHERE q.job_id = OLD.job_id)
       OR EXISTS (SELECT 1 FROM awa.deferred_jobs d WHERE d.job_id = OLD.job_id)
       OR EXISTS (SELECT 1 FROM awa.ready_entries r
                   WHERE r.job_id = OLD.job_id AND r.run_lease >= OLD.original_run_lease) THEN
        RETURN NULL;
    END IF;
    PERFORM awa.workflow_steps_ended(jsonb_build_array(jsonb_build_object(
        'job_id', OLD.job_id, 'outcome', 'failed',
        'error', coalesce(OLD.errors -> -1, '{}') || jsonb_build_object(
            'reason', 'dead-lettered step given up (' || OLD.dlq_reason || ')'))));
    RETURN NULL;
END
$$;
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
    v_handler record;
BEGIN
    -- Held back while awa.workflow_cancel closes the running steps of a workflow without its
    -- lock; it does their bookkeeping itself.
    IF current_setting('awa.workflow_hold', true) = 'on' THEN
        RETURN;
    END IF;
    SELECT array_agg(e.job_id), array_agg(e.outcome), array_agg(e.error), array_agg(e.result),
           array_agg(e.add)
      INTO v_jobs, v_outcomes, v_errors, v_results, v_adds
      FROM jsonb_to_recordset(p_ended) AS e(job_id bigint, outcome text, error jsonb,
                                             result jsonb, add jsonb);
    IF v_jobs IS NULL THEN
        RETURN;
    END IF;
    PERFORM awa.workflow_lock(w.workflow_id)
       FROM (SELECT DISTINCT s.workflow_id FROM awa.workflow_steps s
              WHERE s.job_id = ANY (v_jobs) ORDER BY 1) w;
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
        IF v_state = 'completed' AND jsonb_typeof(v_adds[v_i]) = 'array' THEN
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
            IF v_state = 'completed' OR v_dep.ignore_failure THEN
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
            SELECT s.job_id, s.name INTO v_handler FROM awa.workflow_steps s
             WHERE s.workflow_id = v_step.workflow_id AND s.on_failure AND s.state = 'held';
            IF NOT FOUND THEN
                PERFORM awa.workflow_finish(v_step.workflow_id);
            ELSIF v_wf.failures > 0 AND v_wf.cancel_reason IS NULL THEN
                v_release := v_release || v_handler.job_id;
            ELSE
                PERFORM awa.workflow_withdraw(v_handler.job_id, CASE
                    WHEN v_wf.cancel_reason IS NOT NULL THEN 'workflow cancelled: '
                                                             || v_wf.cancel_reason
                    ELSE 'workflow completed: on_failure step not needed' END);
                UPDATE awa.workflow_steps s SET state = 'skipped', finished_at = now()
                 WHERE s.job_id = v_handler.job_id;
                PERFORM awa.workflow_finish(v_step.workflow_id);
            END IF;
        END IF;
        v_i := v_i + 1;
    END LOOP;
    PERFORM awa.workflow_release(v_release);
END
$$;
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
         WHERE s.workflow_id = p_workflow_id AND s.state = 'released' ORDER BY s.position
    LOOP
        PERFORM awa.cancel_job(v_step.job_id, p_reason);
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
        -- A step released since the first pass is cancelled under the lock: a worker closing
        -- it at this very moment makes one of the two transactions retry (a deadlock).
        v_outcome := awa.cancel_job(v_step.job_id, p_reason);
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
