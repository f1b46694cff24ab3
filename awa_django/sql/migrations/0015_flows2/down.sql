-- Reverse of migration 0015_flows2: awa.workflow_step_retried goes, and the workflow
-- functions it changed are restored as migration 0013 applied them.
DROP FUNCTION IF EXISTS awa.workflow_step_retried(bigint);
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
