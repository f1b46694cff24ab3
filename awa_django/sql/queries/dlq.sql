-- Dead-letter queue: listing, grouping, retry, purge and moving failed jobs in (see
-- awa.dlq_retry, awa.dlq_move and awa.dlq_purge). A NULL filter parameter matches everything;
-- error_type and fingerprint are those of an entry's last error ('(none)' for an error without a
-- type), as dlq_groups reports them. kind_prefix and error_type_prefix (lower-cased by the caller)
-- match the start of the name or of any of its dotted parts, in any case: dlq_names turns them
-- into the kinds and types they match (kinds, error_types), which the filter is given as values.

-- name: dlq_names
-- The kinds and last-error types of the DLQ that the prefixes match (NULL: no such filter),
-- each found by a loose scan of an index (awa.dlq_kinds, awa.dlq_error_types), then given to
-- dlq_filter as arrays of values, so the planner estimates a filter from its statistics of
-- those names, as it cannot from a prefix or an array computed while the statement runs, and
-- reads a rare name's entries from the index.
SELECT CASE WHEN %(kind_prefix)s::text IS NOT NULL
            THEN awa.dlq_kinds(%(kind_prefix)s::text) END AS kinds,
       CASE WHEN %(error_type_prefix)s::text IS NOT NULL
            THEN awa.dlq_error_types(%(error_type_prefix)s::text) END AS error_types

-- name: dlq_filter
-- Whether entry d matches the filters: the one filter every listing, count and bulk action of
-- the DLQ applies.
(%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
   AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
   AND (%(kinds)s::text[] IS NULL OR d.kind = ANY (%(kinds)s::text[]))
   AND (%(reason)s::text IS NULL OR d.dlq_reason = %(reason)s::text)
   AND (%(older_than_s)s::double precision IS NULL
        OR d.dlq_at < now() - make_interval(secs => %(older_than_s)s::double precision))
   AND (%(error_type)s::text IS NULL
        OR coalesce(d.errors -> -1 ->> 'type', '(none)') = %(error_type)s::text)
   AND (%(error_types)s::text[] IS NULL
        OR coalesce(d.errors -> -1 ->> 'type', '(none)') = ANY (%(error_types)s::text[]))
   AND (%(fingerprint)s::text IS NULL
        OR awa.error_fingerprint(d.errors -> -1 ->> 'message') = %(fingerprint)s::text)

-- name: list_dlq
-- One page of entries, newest first, after the (dlq_at, job_id) keyset of the previous page.
SELECT job_id, kind, queue, priority, args, attempt, original_run_lease, max_attempts,
       created_at, metadata, tags, errors, dlq_reason, dlq_at
  FROM awa.dlq_entries d
 WHERE {{dlq_filter}}
   AND (%(before_at)s::timestamptz IS NULL
        OR (d.dlq_at, d.job_id) < (%(before_at)s::timestamptz, %(before_id)s::bigint))
 ORDER BY d.dlq_at DESC, d.job_id DESC
 LIMIT %(limit)s::integer

-- name: dlq_groups
-- The entries matching the filters grouped by their last error's type and message fingerprint
-- (awa.error_fingerprint), largest group first, with when the group's first and last entries
-- entered the DLQ and one message as it was. Only the newest %(scan)s entries are grouped, so
-- the page costs a bounded scan whatever the DLQ holds; scanned says how many were.
WITH recent AS (
    SELECT coalesce(d.errors -> -1 ->> 'type', '(none)') AS error_type,
           awa.error_fingerprint(d.errors -> -1 ->> 'message') AS fingerprint,
           d.errors -> -1 ->> 'message' AS message, d.dlq_at
      FROM awa.dlq_entries d
     WHERE {{dlq_filter}}
     ORDER BY d.dlq_at DESC, d.job_id DESC
     LIMIT %(scan)s::integer
)
SELECT error_type, fingerprint, count(*)::integer AS count, min(dlq_at) AS first_at,
       max(dlq_at) AS last_at, left(min(message), 500) AS sample,
       sum(count(*)) OVER ()::integer AS scanned
  FROM recent
 GROUP BY error_type, fingerprint
 ORDER BY count(*) DESC, max(dlq_at) DESC
 LIMIT %(limit)s::integer

-- name: get_dlq
-- The entries of the given jobs.
SELECT job_id, kind, queue, priority, args, attempt, original_run_lease, max_attempts,
       created_at, metadata, tags, errors, dlq_reason, dlq_at
  FROM awa.dlq_entries WHERE job_id = ANY (%(job_ids)s::bigint[]) ORDER BY job_id

-- name: matching_dlq_ids
-- One batch of entry ids matching the filters, oldest first, locked so a concurrent bulk
-- action takes the next batch instead of the same one.
SELECT d.job_id
  FROM awa.dlq_entries d
 WHERE {{dlq_filter}}
 ORDER BY d.dlq_at, d.job_id
 LIMIT %(limit)s::integer
   FOR UPDATE SKIP LOCKED

-- name: count_matching_dlq
-- How many entries match the filters, for the count a bulk action confirms first (%(cap)s
-- NULL: all of them), or, above the list, at most %(cap)s: a filter reading each entry's last
-- error (a type prefix) detoasts its error list, so an exact count of a common filter over a
-- big DLQ would cost a read of every entry on every page load.
SELECT count(*)::integer FROM (
SELECT 1
  FROM awa.dlq_entries d
 WHERE {{dlq_filter}}
 LIMIT %(cap)s::bigint
) matching

-- name: retry_dlq
-- Puts entries back as fresh attempts (ready, or scheduled at run_at); returns the ids moved.
SELECT job_id FROM awa.dlq_retry(%(job_ids)s::bigint[], %(run_at)s::timestamptz,
                                 %(queue)s::text, %(priority)s::smallint) AS job_id

-- name: purge_dlq
-- Deletes entries for good (see awa.dlq_purge); returns the ids deleted.
SELECT job_id FROM awa.dlq_purge(%(job_ids)s::bigint[]) AS job_id

-- name: purged_at
-- When a job was purged, while its purge marker is kept.
SELECT purged_at FROM awa.purged_jobs WHERE job_id = %(job_id)s::bigint

-- name: ring_held_ids
-- Which of these jobs the queue ring still holds rows of (a ready row, the failed attempt): a
-- purge hides them from every reading (awa.purged_jobs) but cannot delete them before prune.
SELECT DISTINCT job_id FROM awa.ready_entries
 WHERE job_id = ANY(%(job_ids)s::bigint[])
 ORDER BY job_id

-- name: dlq_depths
-- Entries per queue.
SELECT queue, count(*)::integer AS depth FROM awa.dlq_entries GROUP BY queue ORDER BY queue

-- name: failed_job_ids
-- One batch of failed jobs not yet in the DLQ (closures in the ring, or terminal history),
-- matching the filters; older_than_s is measured from when the job failed.
SELECT j.job_id
  FROM awa.jobs j
 WHERE j.job_id IN (SELECT d.job_id FROM awa.done_entries d WHERE d.outcome = 'failed'
                    UNION
                    SELECT h.job_id FROM awa.terminal_history h WHERE h.state = 'failed')
   AND j.state = 'failed'
   AND j.job_id > %(after_id)s::bigint
   AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
   AND (%(kind)s::text IS NULL OR j.kind = %(kind)s::text)
   AND (%(older_than_s)s::double precision IS NULL
        OR j.finalized_at < now() - make_interval(secs => %(older_than_s)s::double precision))
 ORDER BY j.job_id
 LIMIT %(limit)s::integer

-- name: move_to_dlq
-- Moves jobs in one of the given states into the DLQ with a reason; returns the ids moved.
SELECT job_id FROM awa.dlq_move(%(job_ids)s::bigint[], %(states)s::text[], %(reason)s::text)
    AS job_id
