-- Cron schedules: declarations synced by every deployment, the leader's evaluation, operators.

-- name: sync_cron_jobs
-- Upserts the declared schedules (a JSON array of rows). Additive: a schedule another deployment
-- declared is never deleted. The fire history (last_fire_at) and pause state are kept; a row is
-- rewritten only when its definition changed, so a restart leaves no dead tuple behind.
INSERT INTO awa.cron_jobs AS c (name, cron_expr, timezone, kind, queue, args, priority,
                                max_attempts, tags, metadata, missed_fire_policy)
SELECT s.name, s.cron_expr, s.timezone, s.kind, s.queue, s.args, s.priority, s.max_attempts,
       s.tags, s.metadata, s.missed_fire_policy
  FROM jsonb_to_recordset(%(schedules)s::jsonb)
       AS s(name text, cron_expr text, timezone text, kind text, queue text, args jsonb,
            priority smallint, max_attempts integer, tags text[], metadata jsonb,
            missed_fire_policy text)
ON CONFLICT (name) DO UPDATE
   SET cron_expr = excluded.cron_expr, timezone = excluded.timezone, kind = excluded.kind,
       queue = excluded.queue, args = excluded.args, priority = excluded.priority,
       max_attempts = excluded.max_attempts, tags = excluded.tags, metadata = excluded.metadata,
       missed_fire_policy = excluded.missed_fire_policy, updated_at = now()
 WHERE (c.cron_expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts, c.tags,
        c.metadata, c.missed_fire_policy)
       IS DISTINCT FROM
       (excluded.cron_expr, excluded.timezone, excluded.kind, excluded.queue, excluded.args,
        excluded.priority, excluded.max_attempts, excluded.tags, excluded.metadata,
        excluded.missed_fire_policy)
RETURNING 1

-- name: due_cron_jobs
-- Unpaused schedules with what the leader needs to compute their due ticks, and the database
-- clock, so every leader measures "now" alike whatever its host's clock says. No locks: the
-- fire re-checks everything it relies on (see awa.fire_cron).
SELECT name, cron_expr, timezone, missed_fire_policy, last_fire_at, resumed_at, created_at,
       now() AS db_now
  FROM awa.cron_jobs WHERE paused_at IS NULL ORDER BY name

-- name: fire_cron
-- Compare-and-swap on the schedule's last fire, then the jobs of the ticks, in one transaction.
SELECT job_id, kind, queue FROM awa.fire_cron(%(name)s, %(expected_last)s::timestamptz,
                                              %(expected_resumed)s::timestamptz,
                                              %(ticks)s::timestamptz[])

-- name: list_cron_jobs
-- Every schedule in the table, declared by this deployment or not.
SELECT name, cron_expr, timezone, kind, queue, args, priority, max_attempts, tags, metadata,
       missed_fire_policy, last_fire_at, paused_at, paused_by, resumed_at, created_at,
       updated_at
  FROM awa.cron_jobs ORDER BY name

-- name: pause_cron_job
-- Pauses one schedule; the row lock makes it wait for (or win against) a fire in progress.
UPDATE awa.cron_jobs SET paused_at = now(), paused_by = %(paused_by)s
 WHERE name = %(name)s AND paused_at IS NULL
RETURNING name

-- name: resume_cron_job
-- Resumes one schedule. Ticks that fell inside the pause are skipped: evaluation starts from
-- resumed_at, which also invalidates any evaluation that read the row before the pause.
UPDATE awa.cron_jobs SET paused_at = NULL, paused_by = NULL, resumed_at = now()
 WHERE name = %(name)s AND paused_at IS NOT NULL
RETURNING name

-- name: remove_cron_job
-- Deletes one schedule and its fire history; a deployment that still declares it re-creates it
-- on its next start.
WITH history AS (DELETE FROM awa.cron_fires WHERE name = %(name)s)
DELETE FROM awa.cron_jobs WHERE name = %(name)s RETURNING name

-- name: trigger_cron_job
-- Enqueues one job from the schedule's template now, outside its timetable: last_fire_at is not
-- touched, and a paused schedule can be triggered too. The job joins the schedule's recent
-- fires, without a tick.
WITH triggered AS (
    SELECT awa.enqueue_job(c.kind, c.queue, c.priority, c.args, c.max_attempts, NULL,
                           c.metadata || jsonb_build_object(
                               'awa_cron', jsonb_build_object('name', c.name, 'triggered', true)),
                           c.tags) AS job_id, c.name, c.kind, c.queue
      FROM awa.cron_jobs c WHERE c.name = %(name)s
), history AS (
    INSERT INTO awa.cron_fires (name, job_id) SELECT t.name, t.job_id FROM triggered t
)
SELECT t.job_id, t.kind, t.queue FROM triggered t

-- name: recent_cron_fires
-- The newest fires of every schedule (up to `per_schedule` each, newest first) with the state of
-- the job each enqueued; a job retention has pruned reads as state NULL.
SELECT c.name, f.job_id, f.tick, f.fired_at, j.state, j.finalized_at
  FROM awa.cron_jobs c
 CROSS JOIN LATERAL (
       SELECT f.job_id, f.tick, f.fired_at FROM awa.cron_fires f
        WHERE f.name = c.name ORDER BY f.job_id DESC LIMIT %(per_schedule)s) f
  LEFT JOIN LATERAL (
       SELECT j.state, j.finalized_at FROM awa.jobs j WHERE j.job_id = f.job_id LIMIT 1) j ON true
 ORDER BY c.name, f.job_id DESC
