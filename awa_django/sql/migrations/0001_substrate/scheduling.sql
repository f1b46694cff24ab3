-- Scheduling: the fleet-wide rate-limit ledger.
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

-- Append-only ledger of the claims of fleet-limited queues. Each row carries the token bucket's
-- state after its claim as a single timestamp (GCRA): ``full_at`` is when the bucket would be
-- full again, so the bucket at time t holds burst - max(full_at - t, 0) * rate tokens. Only the
-- newest row of a queue is ever read; the leader deletes superseded rows in bounded batches. A
-- claim appends a row instead of updating a per-queue counter, so there is no hot row.
CREATE TABLE awa.rate_ledger (
    queue text NOT NULL,
    entry bigint GENERATED ALWAYS AS IDENTITY,
    claimed_at timestamptz NOT NULL,
    jobs integer NOT NULL CHECK (jobs > 0),
    full_at timestamptz NOT NULL,
    PRIMARY KEY (queue, entry)
);
