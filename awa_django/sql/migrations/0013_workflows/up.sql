-- Durable workflows (docs/workflows.md): a workflow's steps are ordinary jobs that wait in
-- awa.deferred_jobs as 'held' until the transaction that ends their last dependency releases
-- them. Nothing here is read by a job that is not a step.

-- A held step is a deferred row no promoter picks up (promotion names its states literally):
-- only awa.workflow_release moves it into the ready ring, and cancel withdraws it.
ALTER TABLE awa.deferred_jobs DROP CONSTRAINT deferred_jobs_state_check;
ALTER TABLE awa.deferred_jobs ADD CONSTRAINT deferred_jobs_state_check
    CHECK (state IN ('scheduled', 'retryable', 'held'));

CREATE SEQUENCE awa.workflow_id_seq AS bigint;

-- One row per workflow. unfinished counts the steps (the on_failure step aside) that have not
-- ended yet; the transaction that ends the last one gives the workflow its terminal state.
-- Changed in place by each step that ends: a workflow's rows are written per step, not per
-- job of the queue, and are deleted whole by retention once the workflow has finished.
CREATE TABLE awa.workflows (
    workflow_id bigint PRIMARY KEY,
    name text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
    steps integer NOT NULL,
    unfinished integer NOT NULL,
    failures integer NOT NULL DEFAULT 0,
    cancel_reason text,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz
);

CREATE INDEX workflows_state_created ON awa.workflows (state, created_at DESC);
CREATE INDEX workflows_finished ON awa.workflows (finished_at) WHERE finished_at IS NOT NULL;

-- One row per step: its job, how many dependencies it still waits for, and, once it ended,
-- its result or error (kept here so that the ring's prune never takes what a later step reads).
CREATE TABLE awa.workflow_steps (
    workflow_id bigint NOT NULL REFERENCES awa.workflows ON DELETE CASCADE,
    name text NOT NULL,
    job_id bigint NOT NULL UNIQUE,
    position integer NOT NULL,
    after text[] NOT NULL,
    remaining_deps integer NOT NULL,
    on_failure boolean NOT NULL DEFAULT false,
    state text NOT NULL CHECK (state IN ('held', 'released', 'completed', 'failed',
                                         'cancelled', 'dead_lettered', 'skipped')),
    result jsonb,
    error jsonb,
    released_at timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (workflow_id, name)
);

-- The dependency edges, read from the dependency's side when it ends (its dependents) and from
-- the dependent's side when it is released (its inputs).
CREATE TABLE awa.workflow_edges (
    workflow_id bigint NOT NULL,
    from_step text NOT NULL,
    to_step text NOT NULL,
    ignore_failure boolean NOT NULL,
    PRIMARY KEY (workflow_id, from_step, to_step),
    FOREIGN KEY (workflow_id, to_step) REFERENCES awa.workflow_steps ON DELETE CASCADE
);

CREATE INDEX workflow_edges_to ON awa.workflow_edges (workflow_id, to_step);
