-- Durable workflows (functions/workflows.sql, docs/workflows.md).

-- name: create_workflow
-- Writes a validated workflow in the caller's transaction; one row per step with its job id.
SELECT workflow_id, step, job_id FROM awa.workflow_create(%(spec)s::jsonb)

-- name: cancel_workflow
-- Cancels every step of a running workflow that has not ended; NULL when none was running.
SELECT awa.workflow_cancel(%(workflow_id)s::bigint, %(reason)s::text)

-- name: get_workflow
-- A workflow's row.
SELECT workflow_id, name, state, steps, unfinished, failures, cancel_reason, created_at,
       finished_at
  FROM awa.workflows WHERE workflow_id = %(workflow_id)s::bigint

-- name: workflow_steps
-- A workflow's steps in the order they were added.
SELECT name, job_id, after, on_failure, state, result, error, released_at, finished_at
  FROM awa.workflow_steps WHERE workflow_id = %(workflow_id)s::bigint ORDER BY position

-- name: list_workflows
-- Workflows newest first, optionally of one state and name.
SELECT workflow_id, name, state, steps, unfinished, failures, cancel_reason, created_at,
       finished_at
  FROM awa.workflows
 WHERE (%(state)s::text IS NULL OR state = %(state)s::text)
   AND (%(name)s::text IS NULL OR name = %(name)s::text)
 ORDER BY workflow_id DESC LIMIT %(limit)s::integer

-- name: prune_workflows
-- Deletes finished workflows older than the retention, a batch at a time.
SELECT awa.workflow_prune(%(completed_s)s::double precision, %(failed_s)s::double precision,
                          %(limit)s::integer)

-- name: listen_workflow_done
-- Subscribes this session to the channel awa.workflow_finish notifies, before the waiter reads
-- the workflow's state: no notification of its end can then pass unheard.
LISTEN awa_workflow_done

-- name: workflows_finished
-- The workflows this transaction finished so far (awa.workflow_finish), as JSON text or NULL.
SELECT current_setting('awa.workflows_finished', true)

-- name: waiting_on
-- For each held step among the jobs given, the steps it still waits for (its dependencies that
-- have not ended, a dead-lettered one included; for an on_failure step, every other step that
-- has not ended): the first %(shown)s names in the order the steps were added, and how many.
SELECT t.job_id, (array_agg(p.name ORDER BY p.position))[1:%(shown)s], count(*)
  FROM awa.workflow_steps t
  JOIN awa.workflow_steps p ON p.workflow_id = t.workflow_id
 WHERE t.job_id = ANY (%(job_ids)s::bigint[]) AND t.state = 'held'
   AND p.state IN ('held', 'released', 'dead_lettered')
   AND CASE WHEN t.on_failure THEN NOT p.on_failure
            ELSE EXISTS (SELECT 1 FROM awa.workflow_edges e
                          WHERE e.workflow_id = t.workflow_id AND e.from_step = p.name
                            AND e.to_step = t.name) END
 GROUP BY t.job_id

-- name: step_inputs
-- A wide fan-in's dependencies and their results, read when it runs (awa:workflow.inputs_read).
SELECT awa.workflow_step_inputs(%(workflow_id)s::bigint, %(step)s::text)::text
