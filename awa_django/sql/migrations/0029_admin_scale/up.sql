-- Where the leader's rescue has looked (one row per database): every receipt claimed before
-- claimed_before that holds no lease was seen by a complete rescue pass, which closed it if it
-- was still open (a lease-less receipt older than a pass's staleness cutoff is stale at that
-- pass). So the open attempts are those holding a lease and the receipts claimed since: the
-- admin's "what is running" reads those (sql/queries/browse.sql, open_attempt_job_ids) instead
-- of anti-joining every retained receipt with its closure, which grew with the history
-- (issue #36). Without a row (no leader has completed a pass) every receipt is read.
CREATE TABLE awa.rescue_marks (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    claimed_before timestamptz NOT NULL,
    marked_at timestamptz NOT NULL DEFAULT now()
);
