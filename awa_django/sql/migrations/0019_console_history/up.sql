-- A queue's concurrency set live by an operator (docs/operations.md, "Changing a queue's
-- concurrency live"): workers serving the queue use it instead of their configured value until
-- it is reset (NULL). Changed only by operators; each change sends pg_notify('awa_control',
-- <queue>), and workers also read it again every few snapshot intervals.
ALTER TABLE awa.queue_meta
    ADD COLUMN concurrency integer CHECK (concurrency BETWEEN 1 AND 10000),
    ADD COLUMN concurrency_set_at timestamptz,
    ADD COLUMN concurrency_set_by text;

-- The leader's compacted history (docs/admin.md, "History"): the 15-second samples rolled up
-- into 1-minute buckets (kept 25 hours) and those into 15-minute buckets (kept 8 days), per
-- queue (kind = '') and per queue and kind. Counts are the attempts closed in the bucket; the
-- depths (queue rows only, NULL on kind rows) are the bucket's peak. Bounded: about 1,500
-- minute rows and 770 quarter-hour rows per queue and per kind that closed attempts.
CREATE TABLE awa.queue_stat_rollups (
    resolution_s integer NOT NULL CHECK (resolution_s IN (60, 900)),
    queue text NOT NULL,
    kind text NOT NULL,
    bucket_at timestamptz NOT NULL,
    completed integer NOT NULL,
    failed integer NOT NULL,
    available integer,
    scheduled integer,
    retryable integer,
    running integer,
    dlq integer,
    PRIMARY KEY (resolution_s, queue, kind, bucket_at)
);

-- The trim and the charts of every queue read a resolution's buckets by time.
CREATE INDEX queue_stat_rollups_bucket_at ON awa.queue_stat_rollups (resolution_s, bucket_at);
