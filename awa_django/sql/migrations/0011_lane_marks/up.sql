-- Migration 0011_lane_marks: a claim of a queue with many lanes visits the lanes that may hold
-- work, as its newest lane mark records them, instead of probing every lane it ever had.

-- The lanes of a queue that may hold work, as a claim found them: a lane that is not in a
-- queue's mark had nothing to claim in the mark's snapshot, and can only have work now through a
-- commit that snapshot did not see, of a transaction from seen_below (the snapshot's xmax) on or
-- of one listed in unseen (in progress then, or the marking transaction itself). lanes holds
-- each lane as priority * 65536 + shard, in priority order; shards is one more than the highest
-- shard among them. Appended by claims of queues with more than 4 lanes per shard when they
-- learn something the newest mark does not say; only a queue's newest mark is read, and the
-- leader deletes the older ones.
CREATE TABLE awa.lane_marks (
    queue text NOT NULL,
    mark bigint GENERATED ALWAYS AS IDENTITY,
    seen_below xid8 NOT NULL,
    unseen xid8[] NOT NULL,
    lanes integer[] NOT NULL,
    shards smallint NOT NULL,
    marked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, mark)
);

-- A queue's commits by transaction: those a lane mark did not see.
CREATE INDEX lane_commits_batch ON awa.lane_commits (queue, batch);

-- Replaced by the three-argument awa.claim_order and by lane marks (claim.sql, applied next).
DROP FUNCTION IF EXISTS awa.claim_order(text, double precision);
DROP FUNCTION IF EXISTS awa.lane_has_work(text, smallint, smallint);
