-- Sessions waiting for a job to end (awa.wait, awa.await_job): one row per waiting session and
-- job. The closers (awa.close_batch, awa.cancel_job) notify channel awa_job_done only for jobs
-- named here, so that a job nobody waits on ends without a notification; the table is empty
-- unless someone waits, and only waiters write it. A waiter deletes its row when it stops, and
-- deletes the rows of sessions that ended without doing so (a killed process) as it registers:
-- pid and backend_start name the session, as a pid alone may be reused.
-- Part of migration 0005 as released: never edited once released (a change is a new migration).
CREATE TABLE awa.job_waiters (
    job_id bigint NOT NULL,
    pid integer NOT NULL,
    backend_start timestamptz NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, pid)
);
