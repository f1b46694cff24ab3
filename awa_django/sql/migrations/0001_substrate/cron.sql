-- Cron schedules (docs/scheduling.md).
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

-- One row per periodic schedule. Deployments upsert the schedules they declare and never delete
-- one (removal is an explicit operator action). last_fire_at is the newest tick enqueued: the
-- leader's compare-and-swap on it (awa.fire_cron) is what keeps a tick from firing twice across
-- a leader failover. resumed_at takes part in the same swap, so ticks that fell inside a pause
-- are never fired by an evaluation that read the row before the pause.
CREATE TABLE awa.cron_jobs (
    name text PRIMARY KEY,
    cron_expr text NOT NULL,
    timezone text NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL,
    args jsonb NOT NULL,
    priority smallint NOT NULL,
    max_attempts integer NOT NULL,
    tags text[] NOT NULL,
    metadata jsonb NOT NULL,
    missed_fire_policy text NOT NULL CHECK (missed_fire_policy IN ('coalesce', 'catch_up')),
    last_fire_at timestamptz,
    paused_at timestamptz,
    paused_by text,
    resumed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
