-- Migration 0030_step_costs (#34): what the server does per workflow step.
--
-- The foreign keys of the steps (to their workflow) and of the edges (to their dependent step)
-- go: each checked the referenced row for every step and edge written, a nested statement per
-- row in the enqueue of a group of thousands. Only awa.workflow_create and awa.workflow_graft
-- write these rows, for a workflow they create or hold the lock of, and awa.workflow_prune
-- now deletes a workflow's steps and edges with it (the cascade the keys did).
ALTER TABLE awa.workflow_steps DROP CONSTRAINT workflow_steps_workflow_id_fkey;
ALTER TABLE awa.workflow_edges DROP CONSTRAINT workflow_edges_workflow_id_to_step_fkey;

-- A step's row is updated when it is released and when it ends, neither touching an indexed
-- column: room left on its page keeps those updates HOT (no new index entries) where a full
-- page moved the new version to another page and indexed it again. Half of each page: a close
-- batch of a few dozen steps updates rows that were written side by side, on the same pages.
ALTER TABLE awa.workflow_steps SET (fillfactor = 50);
