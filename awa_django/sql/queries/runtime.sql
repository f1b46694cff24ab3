-- Descriptors and runtime instances: what workers declare and report about themselves.

-- name: publish_declarations
-- Publishes a process's declarations in one statement (#37): each queue's DLQ policy where
-- close_attempts reads it, the queue and kind descriptors, and the values behind each declared
-- hash. Every worker of a fleet republishes the same rows, so each part writes only what
-- changed, and leaves unchanged rows out before its upsert: ON CONFLICT DO UPDATE locks the row
-- it conflicts with even when its WHERE then writes nothing, and a fleet queued up behind each
-- other's locks. One statement, not four in a transaction: an idle fleet's republishing was
-- six statements a time (BEGIN and COMMIT included). Rows go in key order within each part and
-- the parts run in one order, so two workers changing overlapping rows wait in one order and
-- cannot deadlock. Freshness comes from the snapshots of the runtimes that declare a descriptor
-- (see the lists). A version already recorded is left as it is.
WITH {{declaration_writes}}
SELECT

-- name: declaration_writes
-- The writes of publish_declarations, as the common table expressions a statement starts with
-- (publish_runtime publishes with the first snapshot it writes).
policies AS (
    INSERT INTO awa.queue_meta AS m (queue, dlq_enabled)
    SELECT p.queue, p.dlq_enabled
      FROM unnest(%(policy_queue)s::text[], %(policy_dlq)s::boolean[]) AS p (queue, dlq_enabled)
     WHERE NOT EXISTS (SELECT FROM awa.queue_meta a
                        WHERE a.queue = p.queue
                          AND a.dlq_enabled IS NOT DISTINCT FROM p.dlq_enabled)
     ORDER BY p.queue
    ON CONFLICT (queue) DO UPDATE SET dlq_enabled = excluded.dlq_enabled
     WHERE m.dlq_enabled IS DISTINCT FROM excluded.dlq_enabled
), queues AS (
    INSERT INTO awa.queue_descriptors AS q (queue, display_name, description, owner,
                                            dlq_enabled, descriptor_hash)
    SELECT d.*
      FROM unnest(%(queue)s::text[], %(display_name)s::text[], %(description)s::text[],
                  %(owner)s::text[], %(dlq)s::boolean[], %(hash)s::text[])
           AS d (queue, display_name, description, owner, dlq_enabled, descriptor_hash)
     WHERE NOT EXISTS (SELECT FROM awa.queue_descriptors a
                        WHERE a.queue = d.queue AND a.descriptor_hash = d.descriptor_hash)
     ORDER BY d.queue
    ON CONFLICT (queue) DO UPDATE
       SET display_name = excluded.display_name, description = excluded.description,
           owner = excluded.owner, dlq_enabled = excluded.dlq_enabled,
           descriptor_hash = excluded.descriptor_hash,
           changed_at = now(), refreshed_at = now()
     WHERE q.descriptor_hash IS DISTINCT FROM excluded.descriptor_hash
), kinds AS (
    INSERT INTO awa.kind_descriptors AS k (kind, queue, description, owner, docs_url,
                                           descriptor_hash)
    SELECT d.*
      FROM unnest(%(kind)s::text[], %(kind_queue)s::text[], %(kind_description)s::text[],
                  %(kind_owner)s::text[], %(docs_url)s::text[], %(kind_hash)s::text[])
           AS d (kind, queue, description, owner, docs_url, descriptor_hash)
     WHERE NOT EXISTS (SELECT FROM awa.kind_descriptors a
                        WHERE a.kind = d.kind AND a.descriptor_hash = d.descriptor_hash)
     ORDER BY d.kind
    ON CONFLICT (kind) DO UPDATE
       SET queue = excluded.queue, description = excluded.description, owner = excluded.owner,
           docs_url = excluded.docs_url, descriptor_hash = excluded.descriptor_hash,
           changed_at = now(), refreshed_at = now()
     WHERE k.descriptor_hash IS DISTINCT FROM excluded.descriptor_hash
), versions AS (
    INSERT INTO awa.declared_versions (described, name, descriptor_hash, fields)
    SELECT v.described, v.name, v.descriptor_hash, v.fields
      FROM unnest(%(described)s::text[], %(names)s::text[], %(hashes)s::text[],
                  %(fields)s::jsonb[]) AS v (described, name, descriptor_hash, fields)
     ORDER BY v.described, v.name, v.descriptor_hash
    ON CONFLICT (described, name, descriptor_hash) DO NOTHING
)

-- name: publish_runtime
-- A process's first snapshot: publishes its declarations (as publish_declarations) and writes
-- its runtime row in one statement, and answers as report_runtime (nothing to compare yet:
-- the declarations were just written).
WITH {{declaration_writes}}, {{runtime_write}}
SELECT ({{count_peers}}) AS peers, ({{live_concurrency}}) AS concurrency, false AS diverged

-- name: report_runtime
-- Writes one process's runtime snapshot and answers, in the same statement, what the process
-- reads back: how many live processes compete with it for a role (its session tries slow down
-- as that grows), the live concurrency operators set on its queues (the safety net behind
-- the awa_control notifications), and whether what is stored of its declarations differs from
-- them (a worker of another version wrote its own, or a row went): the reporter then publishes
-- them again. The declarations' four upserts are not in it: an idle process runs it once a
-- minute, and the server planned them on every run for its first minutes, more than it spent
-- running the statement (#37).
WITH {{runtime_write}}
SELECT ({{count_peers}}) AS peers, ({{live_concurrency}}) AS concurrency,
       ({{declarations_diverged}}) AS diverged

-- name: runtime_write
-- The upsert of a process's runtime row, as the common table expression of the statements that
-- write a snapshot.
written AS (
    INSERT INTO awa.runtime_instances (instance_id, hostname, pid, version, started_at,
                                       last_seen_at, queues, in_flight, is_leader, healthy,
                                       shutting_down, queue_hashes, kind_hashes)
    VALUES (%(instance_id)s, %(hostname)s, %(pid)s, %(version)s, %(started_at)s, now(),
            %(queues)s::jsonb, %(in_flight)s, %(is_leader)s, %(healthy)s, %(shutting_down)s,
            %(queue_hashes)s::jsonb, %(kind_hashes)s::jsonb)
    ON CONFLICT (instance_id) DO UPDATE
       SET last_seen_at = now(), queues = excluded.queues, in_flight = excluded.in_flight,
           is_leader = excluded.is_leader, healthy = excluded.healthy,
           shutting_down = excluded.shutting_down, queue_hashes = excluded.queue_hashes,
           kind_hashes = excluded.kind_hashes
)

-- name: live_concurrency
-- The live concurrency operators set on the process's queues, as a jsonb object by queue.
SELECT coalesce(jsonb_object_agg(m.queue, m.concurrency), '{}'::jsonb)
  FROM awa.queue_meta m
 WHERE m.queue IN (SELECT jsonb_object_keys(%(queues)s::jsonb))
   AND m.concurrency IS NOT NULL

-- name: declarations_diverged
-- Whether what publish_declarations writes differs from the process's declarations: a queue's
-- or kind's stored descriptor has another hash (or is missing), or a queue's DLQ policy is
-- another. The recorded versions need no look: the leader keeps those a live row declares.
SELECT EXISTS (SELECT FROM jsonb_each_text(%(queue_hashes)s::jsonb) AS h (name, hash)
                WHERE NOT EXISTS (SELECT FROM awa.queue_descriptors d
                                   WHERE d.queue = h.name AND d.descriptor_hash = h.hash))
    OR EXISTS (SELECT FROM jsonb_each_text(%(kind_hashes)s::jsonb) AS h (name, hash)
                WHERE NOT EXISTS (SELECT FROM awa.kind_descriptors d
                                   WHERE d.kind = h.name AND d.descriptor_hash = h.hash))
    OR EXISTS (SELECT FROM jsonb_each_text(%(policies)s::jsonb) AS p (queue, dlq)
                WHERE NOT EXISTS (SELECT FROM awa.queue_meta m
                                   WHERE m.queue = p.queue AND m.dlq_enabled = p.dlq::boolean))

-- name: touch_runtime
-- Refreshes a snapshot that did not change since it was written (#37): one timestamp, a HOT
-- update (no index covers last_seen_at). No row (the leader deleted it as stale, after a long
-- stall): the reporter writes the whole snapshot instead.
UPDATE awa.runtime_instances SET last_seen_at = now() WHERE instance_id = %(instance_id)s
RETURNING 1

-- name: touch_runtime_reading_concurrency
-- touch_runtime for a poll-only process, which no notification tells of a change to its queues'
-- live concurrency: the refresh reads it back in the same statement, where a read of its own
-- every interval was most of what such a process sent besides its claims (#37).
WITH touched AS (
    {{touch_runtime}}
)
SELECT EXISTS (SELECT FROM touched) AS touched, ({{live_concurrency}}) AS concurrency

-- name: count_peers
-- How many live processes (rows refreshed within %(fresh_s)s seconds) compete with this one for
-- a role that has one holder, itself included: the fewest among all processes (the leader)
-- and those that serve each of its queues (the queue's waiting candidate). Its periodic
-- session tries slow down as that number grows (#37).
SELECT 1 + coalesce(min(counts.n), 0) AS peers
  FROM (SELECT count(r.instance_id) FILTER (WHERE q.queue IS NULL OR r.queues ? q.queue) AS n
          FROM (SELECT NULL::text AS queue
                UNION ALL SELECT jsonb_object_keys(%(queues)s::jsonb)) AS q
          LEFT JOIN awa.runtime_instances AS r
            ON r.instance_id <> %(instance_id)s
           AND r.last_seen_at > now() - make_interval(secs => %(fresh_s)s::double precision)
         GROUP BY q.queue) AS counts

-- name: delete_runtimes
-- Removes runtime rows: a stopping process's own (%(instance_id)s), or, for the leader's
-- cleanup (%(instance_id)s null), the rows of processes silent for longer than the staleness
-- window. A deleted row's last snapshot is the latest refresh of what it declared: the
-- descriptors keep it (refreshed_at), so a stale one says when its code last ran rather than
-- when it was written (#36). One write per descriptor; the rows are locked in key order first,
-- as the upserts take them, so two deleting processes cannot deadlock.
WITH gone AS (
    SELECT r.instance_id, r.last_seen_at, r.queue_hashes, r.kind_hashes
      FROM awa.runtime_instances r
     WHERE CASE WHEN %(instance_id)s::text IS NULL
                THEN r.last_seen_at
                     < now() - make_interval(secs => %(stale_after_s)s::double precision)
                ELSE r.instance_id = %(instance_id)s::text END
), queue_seen AS (
    SELECT h.name, max(g.last_seen_at) AS last_seen_at
      FROM gone g, jsonb_object_keys(g.queue_hashes) AS h (name)
     GROUP BY h.name
), queue_locked AS (
    SELECT d.queue FROM awa.queue_descriptors d JOIN queue_seen s ON s.name = d.queue
     WHERE d.refreshed_at < s.last_seen_at
     ORDER BY d.queue FOR UPDATE OF d
), queue_carried AS (
    UPDATE awa.queue_descriptors d SET refreshed_at = s.last_seen_at
      FROM queue_seen s
     WHERE d.queue = s.name AND d.refreshed_at < s.last_seen_at
       AND d.queue IN (SELECT l.queue FROM queue_locked l)
), kind_seen AS (
    SELECT h.name, max(g.last_seen_at) AS last_seen_at
      FROM gone g, jsonb_object_keys(g.kind_hashes) AS h (name)
     GROUP BY h.name
), kind_locked AS (
    SELECT d.kind FROM awa.kind_descriptors d JOIN kind_seen s ON s.name = d.kind
     WHERE d.refreshed_at < s.last_seen_at
     ORDER BY d.kind FOR UPDATE OF d
), kind_carried AS (
    UPDATE awa.kind_descriptors d SET refreshed_at = s.last_seen_at
      FROM kind_seen s
     WHERE d.kind = s.name AND d.refreshed_at < s.last_seen_at
       AND d.kind IN (SELECT l.kind FROM kind_locked l)
)
-- Staleness tested again on the row deleted: a process that refreshed its row since this
-- statement's snapshot keeps it.
DELETE FROM awa.runtime_instances r USING gone g
 WHERE r.instance_id = g.instance_id
   AND (%(instance_id)s::text IS NOT NULL
        OR r.last_seen_at < now() - make_interval(secs => %(stale_after_s)s::double precision))
RETURNING 1

-- name: delete_undeclared_versions
-- Leader cleanup: recorded versions that no runtime row declares and that are not the stored
-- descriptor. One recorded within the staleness window is kept: its worker records its versions
-- just before it writes its first runtime row.
DELETE FROM awa.declared_versions v
 WHERE v.first_declared_at < now() - make_interval(secs => %(stale_after_s)s::double precision)
   AND NOT EXISTS (
       SELECT 1 FROM awa.runtime_instances r
        WHERE CASE v.described WHEN 'queue' THEN r.queue_hashes ELSE r.kind_hashes END ->> v.name
              = v.descriptor_hash)
   AND NOT EXISTS (
       SELECT 1 FROM awa.queue_descriptors d
        WHERE v.described = 'queue' AND d.queue = v.name AND d.descriptor_hash = v.descriptor_hash)
   AND NOT EXISTS (
       SELECT 1 FROM awa.kind_descriptors d
        WHERE v.described = 'kind' AND d.kind = v.name AND d.descriptor_hash = v.descriptor_hash)
RETURNING 1

-- name: declared_versions
-- The recorded values behind the given hashes of one queue's or kind's descriptor.
SELECT descriptor_hash, fields
  FROM awa.declared_versions
 WHERE described = %(described)s AND name = %(name)s AND descriptor_hash = ANY (%(hashes)s::text[])

-- name: live
-- Whether runtime row's last snapshot is within the window: the process is alive.
last_seen_at >= now() - make_interval(secs => %(stale_after_s)s::double precision)

-- name: descriptor_state
-- The derived columns of descriptor d, from its runtimes' hashes h (descriptor_hashes).
greatest(d.refreshed_at, h.last_seen_at) AS refreshed_at,
       greatest(d.changed_at, h.live_seen_at)
           < now() - make_interval(secs => %(stale_after_s)s::double precision) AS stale,
       coalesce(h.hashes, '{}'::jsonb) AS runtime_hashes,
       coalesce(h.distinct_hashes, 0) > 1 AS drift

-- name: descriptor_hashes
-- Joins to descriptor d (named by d.key) the hashes the runtimes (a CTE of `hashes` by name,
-- with `live`) declare for it: per live runtime, how many differ, and the latest snapshots.
LEFT JOIN LATERAL (
      SELECT jsonb_object_agg(r.instance_id, r.hashes ->> d.key) FILTER (WHERE r.live) AS hashes,
             count(DISTINCT r.hashes ->> d.key) FILTER (WHERE r.live) AS distinct_hashes,
             max(r.last_seen_at) FILTER (WHERE r.live) AS live_seen_at,
             max(r.last_seen_at) AS last_seen_at
        FROM runtimes r WHERE r.hashes ? d.key
  ) h ON true

-- name: list_runtimes
-- Every runtime row, with whether it is live; the newest first.
SELECT instance_id, hostname, pid, version, started_at, last_seen_at, queues, in_flight,
       is_leader, healthy, shutting_down, {{live}} AS live
  FROM awa.runtime_instances
 ORDER BY started_at DESC, instance_id

-- name: list_queue_descriptors
-- Queue descriptors with their derived state: refreshed_at (the latest snapshot of any runtime
-- that declared it, kept in the row when that runtime's row is deleted, or its last write),
-- stale (no live runtime declares it and it was not written within the window), drift (live
-- runtimes declare it with different hashes), and each live runtime's hash.
WITH runtimes AS (
    SELECT instance_id, last_seen_at, queue_hashes AS hashes, {{live}} AS live
      FROM awa.runtime_instances
)
SELECT d.queue, d.display_name, d.description, d.owner, d.dlq_enabled, d.descriptor_hash,
       d.changed_at, {{descriptor_state}}
  FROM (SELECT q.*, q.queue AS key FROM awa.queue_descriptors q) d
  {{descriptor_hashes}}
 ORDER BY d.queue

-- name: list_kind_descriptors
-- Job-kind descriptors with stale and drift, as for queues.
WITH runtimes AS (
    SELECT instance_id, last_seen_at, kind_hashes AS hashes, {{live}} AS live
      FROM awa.runtime_instances
)
SELECT d.kind, d.queue, d.description, d.owner, d.docs_url, d.descriptor_hash, d.changed_at,
       {{descriptor_state}}
  FROM (SELECT k.*, k.kind AS key FROM awa.kind_descriptors k) d
  {{descriptor_hashes}}
 ORDER BY d.kind
