-- Unique keys: locking them at enqueue and sweeping expired claims.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Locks the given unique keys for the calling transaction, in key order (two batches sharing
-- keys cannot deadlock on each other), and returns the keys still held: whose holder job is in
-- one of its covered states right now. Each key's transaction-scoped advisory lock is held until
-- the caller commits, so a concurrent producer of the same key waits here and then, reading
-- with a fresh snapshot after the lock, sees this caller's committed claim.
-- 1096237397 = 'AWAU': the unique-key lock class; keys hashing alike merely share a lock.
CREATE OR REPLACE FUNCTION awa.lock_unique_keys(p_keys bytea[])
RETURNS TABLE (unique_key bytea, job_id bigint, state text)
LANGUAGE plpgsql AS $$
DECLARE
    v_key bytea;
    v_claim record;
    v_state text;
BEGIN
    FOR v_key IN SELECT DISTINCT k FROM unnest(p_keys) AS k ORDER BY k LOOP
        PERFORM pg_advisory_xact_lock(1096237397, hashtext(encode(v_key, 'hex')));
    END LOOP;
    FOR v_claim IN
        SELECT c.unique_key, c.job_id, c.states FROM awa.unique_claims c
         WHERE c.unique_key = ANY (p_keys)
    LOOP
        -- One job at a time, by id, so the view is read through its per-table job_id indexes.
        -- The cached generic plan keeps that (job_id is no partition key); planning the view
        -- afresh on every call would cost more than the lookup itself.
        -- waiting_external is a running attempt waiting on a callback: covered as running.
        SELECT CASE j.state WHEN 'waiting_external' THEN 'running' ELSE j.state END
          INTO v_state FROM awa.jobs j WHERE j.job_id = v_claim.job_id;
        IF FOUND AND v_state = ANY (v_claim.states) THEN
            unique_key := v_claim.unique_key;
            job_id := v_claim.job_id;
            state := v_state;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

-- Deletes unique claims that can no longer conflict, at most p_limit of each kind per call, and
-- returns how many went and where the scan of keys without a period stopped (NULL at the end of
-- the table, so the caller starts over). Claims of an ended period go without a check: no
-- enqueue computes those keys again (one minute of grace covers producers whose clock lags).
-- Any other claim goes once its holder left its covered states or was pruned, checked after
-- taking the key's lock with a fresh snapshot, so a producer that took the key over meanwhile
-- is seen; a key a producer holds right now is skipped until the next pass. Nothing depends on
-- this cleanup for correctness: it only keeps the table from growing with dead keys.
CREATE OR REPLACE FUNCTION awa.sweep_unique_claims(p_limit integer, p_after bytea)
RETURNS TABLE (deleted integer, next_after bytea) LANGUAGE plpgsql AS $$
DECLARE
    v_key bytea;
    v_job_id bigint;
    v_states text[];
    v_state text;
    v_seen integer := 0;
    v_count integer;
BEGIN
    deleted := 0;
    WITH ended AS (
        SELECT c.unique_key FROM awa.unique_claims c
         WHERE c.expires_at < now() - interval '1 minute'
         ORDER BY c.expires_at LIMIT p_limit
    )
    DELETE FROM awa.unique_claims c USING ended e WHERE c.unique_key = e.unique_key;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    FOR v_key IN
        SELECT c.unique_key FROM awa.unique_claims c
         WHERE c.expires_at IS NULL AND c.unique_key > coalesce(p_after, '\x'::bytea)
         ORDER BY c.unique_key LIMIT p_limit
    LOOP
        v_seen := v_seen + 1;
        next_after := v_key;
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(1096237397, hashtext(encode(v_key, 'hex')));
        SELECT c.job_id, c.states INTO v_job_id, v_states FROM awa.unique_claims c
         WHERE c.unique_key = v_key;
        CONTINUE WHEN NOT FOUND;
        SELECT CASE j.state WHEN 'waiting_external' THEN 'running' ELSE j.state END
          INTO v_state FROM awa.jobs j WHERE j.job_id = v_job_id;
        CONTINUE WHEN FOUND AND v_state = ANY (v_states);
        DELETE FROM awa.unique_claims c WHERE c.unique_key = v_key AND c.job_id = v_job_id;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        deleted := deleted + v_count;
    END LOOP;
    IF v_seen < p_limit THEN
        next_after := NULL;
    END IF;
    RETURN NEXT;
END
$$;
