-- Each schedule's recent fires (docs/scheduling.md, "Recent fires"): one row per job a fire or
-- a trigger enqueued, so the admin can show a schedule's last fires with their jobs' outcomes
-- without searching the jobs' metadata. Cron fires rarely: awa.fire_cron keeps the newest 50
-- rows of its schedule and deletes the rest; removing a schedule removes its rows.
CREATE TABLE awa.cron_fires (
    name text NOT NULL,
    -- Job ids only grow: the newest fires of a schedule are the end of its index range.
    job_id bigint NOT NULL,
    -- The timetable tick the job was enqueued for; NULL for a trigger outside the timetable.
    tick timestamptz,
    fired_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, job_id)
);
