-- Unique claims (docs/scheduling.md).
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

-- Who holds a unique key. A claim belongs to one job and covers the states it was enqueued
-- with; it is never touched by the worker's hot path. A job that left those states (or whose
-- history was pruned) still owns the row until the next enqueue of the key takes it over:
-- awa.lock_unique_keys checks the holder's current state, so the release is exact without a
-- write at every transition.
CREATE TABLE awa.unique_claims (
    unique_key bytea PRIMARY KEY,
    job_id bigint NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    states text[] NOT NULL,
    -- End of the period bucket the key belongs to (NULL for keys without a period): past it,
    -- no enqueue can compute this key again, so the claim can be dropped without a state check.
    expires_at timestamptz,
    claimed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX unique_claims_expires_at ON awa.unique_claims (expires_at)
    WHERE expires_at IS NOT NULL;
