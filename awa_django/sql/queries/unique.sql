-- Unique claims: which job holds a unique key.

-- name: lock_unique_keys
-- Locks the keys until the caller's transaction ends and returns those whose holder is still in
-- a covered state (see awa.lock_unique_keys); a key missing from the result is free.
SELECT unique_key, job_id FROM awa.lock_unique_keys(%(keys)s::bytea[])

-- name: record_unique_claims
-- Records new holders of keys locked by awa.lock_unique_keys in this transaction, taking over
-- claims whose previous holder left its covered states (or was pruned).
INSERT INTO awa.unique_claims AS c (unique_key, job_id, kind, queue, states, expires_at)
SELECT k.unique_key, k.job_id, %(kind)s, %(queue)s, %(states)s::text[],
       %(expires_at)s::timestamptz
  FROM unnest(%(keys)s::bytea[], %(job_ids)s::bigint[]) AS k(unique_key, job_id)
ON CONFLICT (unique_key) DO UPDATE
   SET job_id = excluded.job_id, kind = excluded.kind, queue = excluded.queue,
       states = excluded.states, expires_at = excluded.expires_at,
       claimed_at = clock_timestamp()

-- name: unique_holder
-- The job that last claimed a key, whatever its state now.
SELECT job_id FROM awa.unique_claims WHERE unique_key = %(key)s

-- name: sweep_unique_claims
-- Deletes a batch of claims that can no longer conflict (see awa.sweep_unique_claims).
SELECT deleted, next_after FROM awa.sweep_unique_claims(%(limit)s::integer, %(after)s::bytea)
