-- Conditions the statements of several query files apply, written once: a file includes one
-- as {{name}} (sql/__init__.py). Nothing here runs on its own.

-- name: waiting
-- Ready row r waits for a worker: its attempt holds no claim receipt and its place no
-- tombstone (a cancel).
NOT EXISTS (SELECT 1 FROM awa.claim_receipts c
            WHERE c.job_id = r.job_id AND c.run_lease = r.run_lease + 1
              AND c.ready_slot = r.ready_slot)
   AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t
                    WHERE t.queue = r.queue AND t.priority = r.priority AND t.shard = r.shard
                      AND t.lane_seq = r.lane_seq AND t.ready_slot = r.ready_slot)
