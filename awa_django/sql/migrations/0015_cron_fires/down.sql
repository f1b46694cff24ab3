-- Restores awa.fire_cron as 0001 created it (no fire history), then drops the history.

CREATE OR REPLACE FUNCTION awa.fire_cron(p_name text, p_expected_last timestamptz,
                              p_expected_resumed timestamptz, p_ticks timestamptz[])
RETURNS TABLE (job_id bigint, kind text, queue text) LANGUAGE plpgsql AS $$
DECLARE
    v_row awa.cron_jobs;
    v_tick timestamptz;
BEGIN
    UPDATE awa.cron_jobs c SET last_fire_at = p_ticks[array_upper(p_ticks, 1)]
     WHERE c.name = p_name AND c.paused_at IS NULL
       AND c.last_fire_at IS NOT DISTINCT FROM p_expected_last
       AND c.resumed_at IS NOT DISTINCT FROM p_expected_resumed
    RETURNING c.* INTO v_row;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The kind and queue the jobs got, as the fire read them, for the caller's announcement.
    kind := v_row.kind;
    queue := v_row.queue;
    FOREACH v_tick IN ARRAY p_ticks LOOP
        job_id := awa.enqueue_job(
            v_row.kind, v_row.queue, v_row.priority, v_row.args, v_row.max_attempts, NULL,
            v_row.metadata || jsonb_build_object(
                'awa_cron', jsonb_build_object('name', v_row.name, 'fire_at', v_tick)),
            v_row.tags);
        RETURN NEXT;
    END LOOP;
END
$$;

DROP TABLE awa.cron_fires;
