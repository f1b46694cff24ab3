-- Reverse of 0031_enqueue_cost: awa.producer_slot reading the ring cursor and pinning it in two
-- statements, and awa.enqueue_job_alone taking the lane lock, appending the lane_commits row and
-- trying the wake lock in three, as 0018 and 0001 defined them.

-- The ring slot (and its generation) the current transaction writes its ready rows to: read from
-- the ring cursor by the transaction's first write and kept for the rest of it, so all of a
-- transaction's rows of a lane, and the awa.lane_commits row that publishes them, share one
-- slot and are pruned together.
CREATE OR REPLACE FUNCTION awa.producer_slot(OUT slot integer, OUT generation bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_pinned constant text := current_setting('awa.producer_slot', true);
BEGIN
    IF v_pinned IS NOT NULL AND v_pinned <> '' THEN
        slot := split_part(v_pinned, ':', 1)::integer;
        generation := split_part(v_pinned, ':', 2)::bigint;
        RETURN;
    END IF;
    SELECT r.slot, r.generation INTO slot, generation
      FROM awa.queue_ring_rotations r ORDER BY r.generation DESC LIMIT 1;
    PERFORM set_config('awa.producer_slot', slot || ':' || generation, true);
END
$$;

-- awa.enqueue_job for a call that is its own transaction (migration 0018, #32): the Python
-- producer calls it when Django's connection is in autocommit outside atomic(), so the commit
-- follows this statement with nothing in between. The job is then published here, in the
-- statement, exactly as awa.publish_ready would publish it at the commit: its row does not
-- announce, so no commit trigger is queued and the commit runs no statement of awa's.
--
-- Why the lane stays in commit order (docs/architecture.md, "Publication in the enqueue
-- statement"): awa.publish_ready's argument holds because a position is drawn under the lane's
-- shared producer lock, and only as the transaction commits, after its last write. Here the
-- lock is taken before the position is drawn, the position is drawn after the row is written,
-- and what follows the draw is the rest of this statement (an insert and a lock try) and the
-- implicit commit: the window between the draw and the commit is the one the trigger has, and
-- the lock is held across it, so a claimer still tells a producer mid-commit from a dead
-- position. Two autocommit producers, or one and a transactional one, draw positions in the
-- order they commit, up to the same few microseconds as two transactional ones.
--
-- Were the caller's transaction to go on after all (a raw BEGIN on an autocommit connection),
-- nothing is lost or published twice: a transaction that already wrote (it has an xid) or
-- reserved positions to write later (awa.producer_slot pinned its slot: a COPY's reservation
-- writes nothing) might have rows of this lane to publish at commit from a lane_seq below this
-- one's, so the job goes the deferred way (awa.enqueue_job); one that had done neither has
-- nothing before this row, and rows it writes later announce, so publish_ready gives them a
-- position of their own starting at their own lane_seq.
-- It is then a transaction that published early and stays open, which claims step over after
-- the live-hole bound and whose jobs they take if it commits.
CREATE OR REPLACE FUNCTION awa.enqueue_job_alone(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint;
    v_lane_seq bigint;
    v_shard smallint;
    v_slot record;
BEGIN
    IF (p_run_at IS NOT NULL AND p_run_at > now())
       OR pg_current_xact_id_if_assigned() IS NOT NULL
       OR coalesce(current_setting('awa.producer_slot', true), '') <> '' THEN
        -- Scheduled (nothing to publish), or not the transaction's first write or reservation.
        RETURN awa.enqueue_job(p_kind, p_queue, p_priority, p_args, p_max_attempts, p_run_at,
                               p_metadata, p_tags);
    END IF;
    v_job_id := nextval('awa.job_id_seq');
    v_lane_seq := nextval('awa.lane_seq');
    v_shard := awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key');
    v_slot := awa.producer_slot();
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, v_shard, v_lane_seq, v_slot.slot, v_slot.generation, v_job_id,
            p_kind, p_args, 0, 0, p_max_attempts, coalesce(p_run_at, now()), now(), p_metadata,
            p_tags, '[]', false);
    -- As awa.publish_ready: the lock before the position, the wake-up after it.
    PERFORM pg_advisory_xact_lock_shared(1096237388,
                                         awa.lane_lock_key(p_queue, p_priority, v_shard));
    INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                  first_seq, last_seq)
    VALUES (p_queue, p_priority, v_shard,
            nextval(coalesce(to_regclass('awa.' || awa.lane_sequence_name(p_queue, p_priority,
                                                                          v_shard)),
                             awa.create_lane(p_queue, p_priority, v_shard))),
            v_slot.slot, pg_current_xact_id(), v_lane_seq, v_lane_seq);
    IF NOT pg_try_advisory_xact_lock_shared(1096237385, hashtext(p_queue)) THEN
        PERFORM pg_notify('awa', p_queue);
    END IF;
    RETURN v_job_id;
END
$$;
