-- Reverses 0020: awa.workflow_release and awa.workflow_steps_ended as they were before it
-- (0013 and 0016 defined them); awa.workflow_settle is dropped.

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
        SELECT r.job_id, r.after, (
            SELECT coalesce(jsonb_object_agg(p.name, jsonb_build_object(
                       'state', p.state, 'result', p.result, 'error', p.error)), '{}')
              FROM awa.workflow_steps p
             WHERE p.workflow_id = r.workflow_id
               AND CASE WHEN r.on_failure
                        THEN p.state IN ('failed', 'cancelled', 'dead_lettered')
                        ELSE p.name IN (SELECT e.from_step FROM awa.workflow_edges e
                                         WHERE e.workflow_id = r.workflow_id
                                           AND e.to_step = r.name) END) AS inputs
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

DROP FUNCTION IF EXISTS awa.workflow_settle(bigint, integer, text);
