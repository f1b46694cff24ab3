-- Jobs purged from the dead-letter queue whose rows the queue ring still holds. The ring is
-- insert-only, so a purge cannot delete the ready row and failed closure the DLQ entry was
-- made from; this marker hides them from awa.jobs instead (no arguments, no errors, no retry),
-- and prune deletes it with the last ring slot that holds a row of the job.
CREATE TABLE awa.purged_jobs (
    job_id bigint PRIMARY KEY,
    purged_at timestamptz NOT NULL DEFAULT now()
);
