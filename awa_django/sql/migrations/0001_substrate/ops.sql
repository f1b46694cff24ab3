-- Operator surfaces (docs/operations.md): queue and kind descriptors, runtime instances and
-- queue-health samples.
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

-- What code declares about a queue (AWA["QUEUES"][name]) and a job kind (@awa.job), upserted by
-- every worker at start and with each runtime snapshot. descriptor_hash covers the content;
-- refreshed_at says when a live worker last vouched for it (stale when nobody did recently).
CREATE TABLE awa.queue_descriptors (
    queue text PRIMARY KEY,
    display_name text NOT NULL,
    description text NOT NULL,
    owner text NOT NULL,
    dlq_enabled boolean NOT NULL,
    descriptor_hash text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    refreshed_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE awa.kind_descriptors (
    kind text PRIMARY KEY,
    queue text,
    description text NOT NULL,
    owner text NOT NULL,
    docs_url text NOT NULL,
    descriptor_hash text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now(),
    refreshed_at timestamptz NOT NULL DEFAULT now()
);

-- One row per live worker (or awa_maintenance) process, rewritten every
-- RUNTIME_SNAPSHOT_INTERVAL_S; the leader deletes rows silent for RUNTIME_STALE_AFTER_S.
-- queue_hashes / kind_hashes are the descriptor hashes this process declares, so drift (two
-- live processes declaring one queue differently) is visible.
CREATE TABLE awa.runtime_instances (
    instance_id text PRIMARY KEY,
    hostname text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    queues jsonb NOT NULL,
    in_flight integer NOT NULL,
    is_leader boolean NOT NULL,
    healthy boolean NOT NULL,
    shutting_down boolean NOT NULL,
    queue_hashes jsonb NOT NULL,
    kind_hashes jsonb NOT NULL
);

-- The leader's queue-stats pass appends one sample per queue (depth by state, lag, and the
-- completions and failures since the previous pass) for the last-hour charts and throughput.
-- A plain table of a few hundred rows per queue, trimmed by the same pass.
CREATE TABLE awa.queue_stat_samples (
    queue text NOT NULL,
    sampled_at timestamptz NOT NULL,
    available integer NOT NULL,
    scheduled integer NOT NULL,
    retryable integer NOT NULL,
    running integer NOT NULL,
    waiting_external integer NOT NULL,
    dlq integer NOT NULL,
    lag_s double precision NOT NULL,
    completed integer NOT NULL,
    failed integer NOT NULL,
    PRIMARY KEY (queue, sampled_at)
);

CREATE INDEX queue_stat_samples_sampled_at ON awa.queue_stat_samples (sampled_at);
