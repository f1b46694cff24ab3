-- Read-only listings for operator surfaces (the admin): pages of jobs and a job's attempts.

-- name: job_id_window
-- The newest distinct job ids below a keyset cursor, from the four tables that hold a job's
-- body (every claim and closure joins a ready row, so they cover the awa.jobs view). Each arm
-- walks its job_id index backwards and stops after `size` ids, so a page costs the same at any
-- table size; no arm counts. The from_* flags leave out arms that cannot hold the asked-for
-- state, and kind/queue/state are NULL when not filtered.
SELECT job_id FROM (
    (SELECT DISTINCT r.job_id FROM awa.ready_entries r
      WHERE %(from_ready)s AND r.job_id < %(before)s
        AND (%(kind)s::text IS NULL OR r.kind = %(kind)s)
        AND (%(queue)s::text IS NULL OR r.queue = %(queue)s)
      ORDER BY r.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT f.job_id FROM awa.deferred_jobs f
      WHERE %(from_deferred)s AND f.job_id < %(before)s
        AND (%(kind)s::text IS NULL OR f.kind = %(kind)s)
        AND (%(queue)s::text IS NULL OR f.queue = %(queue)s)
        AND (%(state)s::text IS NULL OR f.state = %(state)s)
      ORDER BY f.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT h.job_id FROM awa.terminal_history h
      WHERE %(from_history)s AND h.job_id < %(before)s
        AND (%(kind)s::text IS NULL OR h.kind = %(kind)s)
        AND (%(queue)s::text IS NULL OR h.queue = %(queue)s)
        AND (%(state)s::text IS NULL OR h.state = %(state)s)
      ORDER BY h.job_id DESC LIMIT %(size)s)
    UNION
    (SELECT q.job_id FROM awa.dlq_entries q
      WHERE %(from_dlq)s AND q.job_id < %(before)s
        AND (%(kind)s::text IS NULL OR q.kind = %(kind)s)
        AND (%(queue)s::text IS NULL OR q.queue = %(queue)s)
      ORDER BY q.job_id DESC LIMIT %(size)s)
) ids
 ORDER BY job_id DESC LIMIT %(size)s

-- name: job_attempts
-- Every attempt of one job that started, oldest first: its claim and, once closed, how it
-- ended. A closure sits in the same ring slot as its claim, so both go when the slot is pruned.
SELECT c.attempt, c.run_lease, c.claimed_by, c.claimed_at, c.deadline_at, d.outcome,
       d.finalized_at, d.error
  FROM awa.claim_receipts c
  LEFT JOIN awa.done_entries d
    ON d.job_id = c.job_id AND d.run_lease = c.run_lease AND d.ready_slot = c.ready_slot
 WHERE c.job_id = %(job_id)s
 ORDER BY c.run_lease

-- name: job_progress
-- A job's saved progress and checkpoint: kept in attempt_state while the job lives, copied into
-- terminal_history when its failed or cancelled record outlives its ring slot.
SELECT progress, checkpoint, updated_at FROM awa.attempt_state WHERE job_id = %(job_id)s
UNION ALL
SELECT progress, checkpoint, finalized_at FROM awa.terminal_history WHERE job_id = %(job_id)s
 LIMIT 1
