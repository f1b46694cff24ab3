-- Enqueue shards and ordering keys: which lane of a queue a job goes to.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- The shard a new ready row of p_queue goes to: the same shard for every job with the same
-- ordering key (a stable hash, so related jobs stay in one FIFO lane), a random one otherwise
-- (spreading producers and claimers over the lanes). A queue without a meta row has one shard.
-- PL/pgSQL, not SQL: a SQL function that cannot be inlined is planned on every call, which cost
-- a single enqueue more than the rest of awa.enqueue_job together.
CREATE OR REPLACE FUNCTION awa.enqueue_shard(p_queue text, p_ordering_key text) RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_shards integer;
BEGIN
    SELECT m.enqueue_shards INTO v_shards FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF v_shards IS NULL OR v_shards = 1 THEN
        RETURN 0;
    END IF;
    IF p_ordering_key IS NOT NULL THEN
        -- hashtextextended is the hash partitioning uses: stable across versions.
        RETURN ((hashtextextended(p_ordering_key, 0) & 9223372036854775807) % v_shards)::smallint;
    END IF;
    RETURN floor(random() * v_shards)::smallint;
END
$$;

-- The shard a job re-enters its queue on (promotion of a scheduled or retryable job, a retry
-- from the DLQ): its ordering key's, so a key keeps to one lane (and a sequential queue keeps
-- running it one job at a time); shard 0 for a job without a key.
CREATE OR REPLACE FUNCTION awa.reentry_shard(p_queue text, p_metadata jsonb) RETURNS smallint
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_metadata ->> 'awa:ordering_key' IS NULL THEN
        RETURN 0;
    END IF;
    RETURN awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key');
END
$$;
