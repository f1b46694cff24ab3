-- The closures that ended a job badly (failed or cancelled), by job id, for the admin's and
-- awa.list_jobs' pages, counts and bulk walks of those states (sql/queries/browse.sql,
-- closed_job_ids). Without it each read every closure of the ring, nearly all of them
-- completed, to find the few failed ones (issue #36). Partial: a completed closure, the hot
-- path's, only evaluates the predicate and adds no index entry.
CREATE INDEX done_entries_unsuccessful ON awa.done_entries (job_id)
    WHERE outcome IN ('failed', 'cancelled');
