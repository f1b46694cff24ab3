-- Backlog and hold tables (plain): scheduled and retryable jobs, the dead-letter queue and
-- failed history carried past a prune.
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

-- Scheduled (future run_at, snoozed) and retryable jobs, kept out of the claim path until
-- promotion moves them into the ready ring.
CREATE TABLE awa.deferred_jobs (
    job_id bigint PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('scheduled', 'retryable')),
    kind text NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    run_lease bigint NOT NULL,
    max_attempts integer NOT NULL,
    run_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    deferred_at timestamptz NOT NULL DEFAULT now()
);

-- Partial indexes per literal state: promotion queries name the state literally so these are
-- chosen even with a large backlog.
CREATE INDEX deferred_jobs_scheduled_due ON awa.deferred_jobs (run_at, job_id)
    WHERE state = 'scheduled';

CREATE INDEX deferred_jobs_retryable_due ON awa.deferred_jobs (run_at, job_id)
    WHERE state = 'retryable';

-- Operator hold for terminal failures on DLQ-enabled queues.
CREATE TABLE awa.dlq_entries (
    job_id bigint PRIMARY KEY,
    kind text NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    original_run_lease bigint NOT NULL,
    max_attempts integer NOT NULL,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    dlq_reason text NOT NULL,
    dlq_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX dlq_entries_queue_dlq_at ON awa.dlq_entries (queue, dlq_at DESC);

-- Operator surfaces (docs/operations.md). Routing into awa.dlq_entries happens in
-- awa.close_attempts (the `dead` step) for queues whose queue_meta.dlq_enabled is set.

-- Listing and retention read the DLQ newest or oldest first, across queues.
CREATE INDEX dlq_entries_dlq_at ON awa.dlq_entries (dlq_at, job_id);

CREATE INDEX dlq_entries_kind_dlq_at ON awa.dlq_entries (kind, dlq_at DESC);

-- Failed and cancelled jobs whose ring slot was pruned while they were still inside
-- FAILED_RETENTION_S: one hydrated row per job, deleted by the leader's retention cleanup.
-- Failures are rare next to completions, so a plain table with row deletes stays small.
CREATE TABLE awa.terminal_history (
    job_id bigint PRIMARY KEY,
    run_lease bigint NOT NULL,
    state text NOT NULL CHECK (state IN ('failed', 'cancelled')),
    kind text NOT NULL,
    queue text NOT NULL,
    priority smallint NOT NULL,
    args jsonb NOT NULL,
    attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    run_at timestamptz,
    created_at timestamptz NOT NULL,
    metadata jsonb NOT NULL,
    tags text[] NOT NULL,
    errors jsonb NOT NULL,
    progress jsonb,
    checkpoint jsonb,
    finalized_at timestamptz NOT NULL
);

CREATE INDEX terminal_history_finalized_at ON awa.terminal_history (finalized_at);
