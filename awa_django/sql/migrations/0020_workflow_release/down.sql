-- The awa.workflow_release of 0013 (unchanged through 0017), restored by reversing 0020.
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
