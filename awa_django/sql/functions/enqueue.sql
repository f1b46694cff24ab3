-- Enqueue: appending a job and publishing it at commit.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Commit-time trigger of ready_entries, queued by the first row of every write (announce) and
-- fired after the application's last statement, as its transaction commits (or at SET
-- CONSTRAINTS ... IMMEDIATE). The first firing for a lane publishes all of the transaction's
-- rows of that lane written so far: it appends the lane_commits row that makes them claimable,
-- at the lane's next commit position. awa.published (local to the transaction, so it also rolls
-- back with a savepoint) remembers up to which lane_seq each lane is published, so later
-- firings for the same rows do nothing and rows written after an early publication get a
-- position of their own.
--
-- The position is held only from here until the commit record is durable, never while the
-- application's transaction does its other work, unless that transaction publishes early (SET
-- CONSTRAINTS ... IMMEDIATE) and stays open: claims then step over its position after 250 ms
-- and take its jobs if it commits (awa.claim_ready). The shared lane lock marks it as in flight: a
-- claimer that finds a position missing takes the lock exclusively to learn that no producer of
-- the lane is mid-commit (so the position belongs to a producer that failed and can be stepped
-- over). Producers share it, so they never wait for each other, whatever order they publish
-- lanes in.
--
-- Wake-ups: a worker with nothing to do on a queue holds that queue's wake lock (class
-- 1096237385, 'AWAI'; see worker/wake.py) exclusively, and only then does a commit NOTIFY:
-- PostgreSQL serialises every committing transaction that notifies on one lock held through its
-- commit, which would make busy producers take turns again. A producer that finds no worker
-- waiting holds the lock shared until it has committed, so a worker that is about to wait
-- cannot miss it: it gets the lock only after the commit and claims once more before it waits.
--
-- One statement does the publishing (migration 0026, #32): the lane lock, the position, the
-- lane_commits row, the wake lock's test and the record in awa.published. Each statement a
-- trigger runs at commit is a top-level statement of its own (executor start-up, locks of the
-- tables it names, its snapshot), paid by every enqueueing transaction; the NOTIFY, only while
-- a worker waits, is the one more. The lock is taken in a subquery that is not flattened (OFFSET
-- 0), so its row, and with it the lock, comes before the outer row draws the position; RETURNING
-- runs after the row is written, so the wake lock is tried after the draw, as before.
--
-- An error here aborts the commit: it is raised again naming the job and queue, with the
-- original SQLSTATE, so the caller's atomic() block fails with a clear message and its rows
-- roll back with the jobs.
CREATE OR REPLACE FUNCTION awa.publish_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- The lane's commit sequence, and its key in awa.published.
    v_lane constant text := awa.lane_sequence_name(NEW.queue, NEW.priority, NEW.shard);
    -- Its producer lock's key, worked out here rather than in the INSERT: a plan of the INSERT
    -- for this row's values would run the function to fold it, one more statement.
    v_lock_key constant integer := awa.lane_lock_key(NEW.queue, NEW.priority, NEW.shard);
    v_published constant text := coalesce(current_setting('awa.published', true), '');
    v_at constant integer := position(';' || v_lane || '=' IN v_published);
    v_entry text;
    v_last_seq bigint;
    v_unwatched boolean;  -- no worker waits for the queue: no NOTIFY
    v_recorded text;
BEGIN
    IF v_at > 0 THEN
        v_entry := split_part(substr(v_published, v_at + 1), ';', 1);
        IF NEW.lane_seq <= split_part(v_entry, '=', 2)::bigint THEN
            RETURN NULL;
        END IF;
    END IF;
    -- Every row this transaction wrote took its lane_seq from this session before now.
    v_last_seq := currval('awa.lane_seq');
    BEGIN
        INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                      first_seq, last_seq)
        SELECT NEW.queue, NEW.priority, NEW.shard,
               nextval(coalesce(to_regclass('awa.' || v_lane),
                                awa.create_lane(NEW.queue, NEW.priority, NEW.shard))),
               NEW.ready_slot, NEW.batch, NEW.lane_seq, v_last_seq
          -- The lock before the position: a drawn position is always covered by it.
          FROM (SELECT pg_advisory_xact_lock_shared(1096237388, v_lock_key) OFFSET 0) AS lane_lock
        RETURNING pg_try_advisory_xact_lock_shared(1096237385, hashtext(NEW.queue)),
                  set_config('awa.published',
                             CASE WHEN v_at > 0
                                  THEN replace(v_published, ';' || v_entry,
                                               ';' || v_lane || '=' || v_last_seq)
                                  ELSE v_published || ';' || v_lane || '=' || v_last_seq END,
                             true)
             INTO v_unwatched, v_recorded;
        IF NOT v_unwatched THEN
            PERFORM pg_notify('awa', NEW.queue);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'awa: could not publish job % of queue % at commit: %', NEW.job_id,
                        NEW.queue, SQLERRM
              USING ERRCODE = SQLSTATE;
    END;
    RETURN NULL;
END
$$;

-- Enqueues one job inside the caller's transaction and returns its id. A future run_at goes to
-- the deferred backlog; anything else is appended to its lane as an immutable ready row, which
-- the transaction publishes when it commits (awa.publish_ready). Nothing here waits for, or
-- locks against, another producer.
CREATE OR REPLACE FUNCTION awa.enqueue_job(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint := nextval('awa.job_id_seq');
    v_slot record;
BEGIN
    IF p_run_at IS NOT NULL AND p_run_at > now() THEN
        INSERT INTO awa.deferred_jobs (job_id, state, kind, queue, priority, args, attempt,
                                       run_lease, max_attempts, run_at, created_at, metadata,
                                       tags, errors)
        VALUES (v_job_id, 'scheduled', p_kind, p_queue, p_priority, p_args, 0, 0, p_max_attempts,
                p_run_at, now(), p_metadata, p_tags, '[]');
        RETURN v_job_id;
    END IF;
    v_slot := awa.producer_slot();
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key'),
            nextval('awa.lane_seq'), v_slot.slot, v_slot.generation, v_job_id, p_kind, p_args, 0,
            0, p_max_attempts, coalesce(p_run_at, now()), now(), p_metadata, p_tags, '[]', true);
    RETURN v_job_id;
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
    -- The lane's commit sequence and producer lock key, worked out before the INSERT as
    -- awa.publish_ready does: a plan of the INSERT for this row's values would run the
    -- functions to fold them, each one more statement.
    v_lane text;
    v_lock_key integer;
    v_unwatched boolean;  -- no worker waits for the queue: no NOTIFY
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
    -- As awa.publish_ready, in one statement (migration 0031): the lock before the position
    -- (taken in a subquery that is not flattened, so its row comes before the draw), the
    -- wake lock's test after it (RETURNING runs once the row is written).
    v_lane := awa.lane_sequence_name(p_queue, p_priority, v_shard);
    v_lock_key := awa.lane_lock_key(p_queue, p_priority, v_shard);
    INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                  first_seq, last_seq)
    SELECT p_queue, p_priority, v_shard,
           nextval(coalesce(to_regclass('awa.' || v_lane),
                            awa.create_lane(p_queue, p_priority, v_shard))),
           v_slot.slot, pg_current_xact_id(), v_lane_seq, v_lane_seq
      FROM (SELECT pg_advisory_xact_lock_shared(1096237388, v_lock_key) OFFSET 0) AS lane_lock
    RETURNING pg_try_advisory_xact_lock_shared(1096237385, hashtext(p_queue)) INTO v_unwatched;
    IF NOT v_unwatched THEN
        PERFORM pg_notify('awa', p_queue);
    END IF;
    RETURN v_job_id;
END
$$;
