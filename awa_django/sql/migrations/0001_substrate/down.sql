-- Reverses 0001_substrate. Objects are dropped by name and the schema without CASCADE, so a
-- table someone else created in schema awa (for example through a search_path that includes it)
-- makes this fail loudly instead of being dropped with ours.
-- ==== callbacks ====
DROP FUNCTION awa.take_callback_payload(bigint, bigint, uuid);
DROP FUNCTION awa.lock_callback(bigint, bigint, uuid);
DROP FUNCTION awa.park_callback(bigint, bigint, uuid);
DROP FUNCTION awa.register_callback(bigint, bigint, uuid, double precision, text);
DROP FUNCTION awa.callback_status(bigint, bigint, uuid);
-- ==== Cron schedules and unique claims ====
DROP FUNCTION awa.sweep_unique_claims(integer, bytea);
DROP FUNCTION awa.lock_unique_keys(bytea[]);
DROP TABLE awa.unique_claims;
DROP FUNCTION awa.fire_cron(text, timestamptz, timestamptz, timestamptz[]);
DROP TABLE awa.cron_jobs;

-- ==== Scheduling: fleet-wide rate limits (schedb) ====
DROP FUNCTION awa.claim_ready_limited(text, integer, text, double precision, double precision,
                                      boolean, double precision, integer);
DROP TABLE awa.rate_ledger;

-- ==== Scheduling: enqueue shards, ordering keys and priority aging (schedb) ====
DROP FUNCTION awa.claim_order(text, double precision);
DROP FUNCTION awa.lane_head(text, smallint, smallint);
DROP FUNCTION awa.effective_priority(smallint, timestamptz, double precision);
DROP FUNCTION awa.reentry_shard(text, jsonb);
DROP FUNCTION awa.enqueue_shard(text, text);

-- ==== ops: dead-letter queue, descriptors, runtime instances, queue health ====
DROP FUNCTION awa.drain_queue(text, text);
DROP FUNCTION awa.dlq_move(bigint[], text[], text);
DROP FUNCTION awa.dlq_retry(bigint[], timestamptz, text, smallint);
DROP TABLE awa.queue_stat_samples, awa.runtime_instances, awa.kind_descriptors,
           awa.queue_descriptors;
DROP INDEX awa.done_entries_finalized_at, awa.dlq_entries_kind_dlq_at, awa.dlq_entries_dlq_at;
-- ==== end ops ====
DROP VIEW awa.jobs;
DROP FUNCTION awa.cancel_job(bigint, text);
DROP FUNCTION awa.prune_lease_ring(integer);
DROP FUNCTION awa.rotate_lease_ring(integer);
DROP FUNCTION awa.prune_queue_ring(double precision, double precision, integer);
DROP FUNCTION awa.queue_slot_blocker(integer, double precision);
DROP FUNCTION awa.rotate_queue_ring(integer);
DROP FUNCTION awa.queue_slot_has_rows(integer);
DROP FUNCTION awa.find_rescuable(double precision, integer, timestamptz, timestamptz);
DROP FUNCTION awa.promote_due(text, integer);
DROP FUNCTION awa.heartbeat_attempts(integer[], text[], smallint[], smallint[], bigint[],
                                     bigint[], bigint[], jsonb[], jsonb[], text);
DROP FUNCTION awa.close_attempts(json);
DROP FUNCTION awa.claim_ready(text, integer, text, double precision, double precision,
                                boolean);
DROP FUNCTION awa.enqueue_job(text, text, smallint, jsonb, integer, timestamptz, jsonb, text[]);
DROP TRIGGER ready_entries_publish ON awa.ready_entries;
DROP FUNCTION awa.publish_ready();
DROP FUNCTION awa.producer_slot();
-- The lanes' commit sequences, created on first use (awa.create_lane).
SELECT awa.drop_lane_sequences();
DROP FUNCTION awa.drop_lane_sequences();
DROP FUNCTION awa.create_lane(text, smallint, smallint);
DROP FUNCTION awa.lane_sequence_name(text, smallint, smallint);
DROP FUNCTION awa.lane_lock_key(text, smallint, smallint);
DROP TYPE awa.claimed_job;
DROP TABLE awa.terminal_history, awa.dlq_entries, awa.deferred_jobs, awa.attempt_state, awa.leases,
           awa.lease_ring_rotations, awa.done_entries, awa.claim_receipts,
           awa.ready_tombstones, awa.lane_commits, awa.ready_entries, awa.queue_lanes,
           awa.queue_meta,
           awa.queue_ring_rotations, awa.ring_config;
DROP SEQUENCE awa.lane_seq, awa.job_id_seq;
DROP SCHEMA awa;
