-- Migration 0014_live_holes: a transaction that drew its lane position early (SET CONSTRAINTS
-- ... IMMEDIATE) and stays open no longer stalls its lane; claims step over its position once
-- it has been missing for longer than a bound, and record it here so that its jobs are still
-- claimed, once, if it commits in the end.

-- Ranges of a lane's positions (first_seq .. last_seq) that a claim stepped over while a
-- producer of the lane could still commit one of them: claims take the rows of a commit that
-- later appears in a range before the lane's others, and delete the range once no position in
-- it can still bring a job (each has a commit whose rows are all claimed, or no transaction that
-- could have drawn one is still in flight: none of the lane's producers, or none of those in
-- progress when the range was recorded, whose ids are all below seen_below, the recording
-- snapshot's xmax). Empty unless a transaction held a position for longer than the bound; a
-- claim reads it with one index probe per lane.
CREATE TABLE awa.lane_holes (
    queue text NOT NULL,
    priority smallint NOT NULL,
    shard smallint NOT NULL,
    first_seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    seen_below xid8 NOT NULL DEFAULT pg_snapshot_xmax(pg_current_snapshot()),
    skipped_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, priority, shard, first_seq)
);
