-- Sessions waiting for a job to end (awa.wait): awa.job_waiters, which the closers read to
-- decide whom to notify on channel awa_job_done.

-- name: register_waiter
-- Registers this session as waiting on a job, after deleting the rows of sessions that ended
-- without deleting their own (a killed waiter). A session is live while pg_stat_activity
-- shows its pid with the same backend_start; that column is null for another role's
-- sessions unless we may read their statistics, and a live pid is then enough.
WITH gone AS (
    DELETE FROM awa.job_waiters w
     WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                        WHERE a.pid = w.pid
                          AND (a.backend_start IS NULL OR a.backend_start = w.backend_start))
)
INSERT INTO awa.job_waiters (job_id, pid, backend_start)
SELECT %(job_id)s::bigint, a.pid, a.backend_start
  FROM pg_stat_activity a WHERE a.pid = pg_backend_pid()
ON CONFLICT DO NOTHING

-- name: unregister_waiter
-- This session no longer waits on the job.
DELETE FROM awa.job_waiters WHERE job_id = %(job_id)s::bigint AND pid = pg_backend_pid()

-- name: listen_job_done
-- Subscribes this session to the channel the closers notify (JOB_DONE_CHANNEL), before it
-- registers as a waiter: no notification of its job can then pass unheard.
LISTEN awa_job_done
