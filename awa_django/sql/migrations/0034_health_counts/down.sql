-- Reverse of migration 0034_health_counts: awa.drain_queue as it was before it (every
-- ready row of the queue probed for its claim), then awa.waiting_entries goes.
CREATE OR REPLACE FUNCTION awa.drain_queue(p_queue text, p_reason text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
    v_cancelled integer := 0;
BEGIN
    FOR v_job_id IN
        SELECT d.job_id FROM awa.deferred_jobs d WHERE d.queue = p_queue
        UNION
        SELECT r.job_id FROM awa.ready_entries r
         WHERE r.queue = p_queue
           AND NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
                            WHERE c.job_id = r.job_id AND c.run_lease = r.run_lease + 1
                              AND c.ready_slot = r.ready_slot)
           AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                            WHERE t.queue = r.queue AND t.priority = r.priority
                              AND t.shard = r.shard AND t.lane_seq = r.lane_seq
                              AND t.ready_slot = r.ready_slot)
    LOOP
        IF awa.cancel_job(v_job_id, p_reason) IN ('cancelled_queued', 'cancelled_scheduled') THEN
            v_cancelled := v_cancelled + 1;
        END IF;
    END LOOP;
    RETURN v_cancelled;
END
$$;
DROP FUNCTION awa.waiting_entries(text);
