-- Cron: firing a schedule's ticks exactly once.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Enqueues the given ticks of one schedule, oldest first, if and only if the schedule is
-- unpaused and still stands where the caller read it; returns the new job ids (none when the
-- swap lost). The UPDATE takes the schedule's row lock, so a concurrent pause either commits
-- first (the re-checked WHERE then fails) or waits for this fire to commit; a second leader
-- that read the same row blocks here and then finds last_fire_at moved. The jobs are enqueued
-- in the same transaction as the swap: both commit or neither does, and so does their row in
-- the schedule's fire history (awa.cron_fires, migration 0015).
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
        INSERT INTO awa.cron_fires (name, job_id, tick) VALUES (v_row.name, job_id, v_tick);
        RETURN NEXT;
    END LOOP;
    -- The fire history keeps each schedule's newest 50 jobs.
    DELETE FROM awa.cron_fires f
     WHERE f.name = p_name
       AND f.job_id < (SELECT k.job_id FROM awa.cron_fires k WHERE k.name = p_name
                        ORDER BY k.job_id DESC OFFSET 49 LIMIT 1);
END
$$;
