-- Enqueue: appending a job and publishing it at commit.
-- Current definitions, CREATE OR REPLACE only. Migration 0001 applies every function file;
-- a later migration that changes a definition applies its file again (docs/architecture.md,
-- "SQL layout and schema changes").

-- Commit-time trigger of ready_entries, queued by the first row of every write (announce) and
-- fired after the application's last statement, as its transaction commits (or at SET
-- CONSTRAINTS ... IMMEDIATE). The first firing that finds rows to publish publishes every lane
-- the transaction wrote so far: its own row's lane and those listed (awa.list_lane).
-- For each it appends the lane_commits row that makes the lane's rows
-- claimable, at the lane's next commit position. awa.published (local to the transaction, so it
-- also rolls back with a savepoint, as the list of lanes does) remembers up to which lane_seq each
-- lane is published, so later firings for the same rows do nothing and rows written after an
-- early publication get a position of their own.
--
-- Every lane's range starts at this firing's row. Events fire in the order their rows were
-- written and a lane_seq is drawn in that order, so every row this transaction wrote and has not
-- published yet, in any lane, is at or above it: an earlier row's firing has published its lane
-- up to the session's latest lane_seq, which covers every row written before the commit began.
-- A lane's own first row may come later (the range is filtered by batch, as its upper end, the
-- session's latest lane_seq, always was). The list only says which lanes: rows written some
-- other way (a COPY, a promotion, raw SQL) announce and publish their lanes themselves.
--
-- The position is held only from here until the commit record is durable, never while the
-- application's transaction does its other work, unless that transaction publishes early (SET
-- CONSTRAINTS ... IMMEDIATE) and stays open: claims then step over its position after 250 ms
-- and take its jobs if it commits (awa.claim_ready). The shared lane lock marks it as in flight: a
-- claimer that finds a position missing takes the lock exclusively to learn that no producer of
-- the lane is mid-commit (so the position belongs to a producer that failed and can be stepped
-- over). Producers share it, so they never wait for each other, whatever order they publish
-- lanes in; claimers only try it, so a producer holding one lane's lock while it takes the
-- next's waits for no one but another creator of a lane that does not exist yet.
--
-- Wake-ups: a worker with nothing to do on a queue holds that queue's wake lock (class
-- 1096237385, 'AWAI'; see worker/wake.py) exclusively, and only then does a commit NOTIFY:
-- PostgreSQL serialises every committing transaction that notifies on one lock held through its
-- commit, which would make busy producers take turns again. A producer that finds no worker
-- waiting holds the lock shared until it has committed, so a worker that is about to wait
-- cannot miss it: it gets the lock only after the commit and claims once more before it waits.
--
-- One statement publishes every lane (migration 0035, #32; one per lane since 0026): the lane
-- locks, the positions, the lane_commits rows and the wake locks' tests; the record in
-- awa.published is made from the rows it returns. Each statement a trigger runs at commit is a
-- top-level statement of its own (executor start-up, locks of the tables it names, its
-- snapshot), paid by every enqueueing transaction; a NOTIFY, only while a worker waits, is one
-- more per queue. Each lane's lock is taken in a subquery that is not flattened (OFFSET 0), so
-- its row, and with it the lock, comes before the outer row draws the lane's position;
-- RETURNING runs after the row is written, so the wake lock is tried after the draw, as before.
-- The lanes come from jsonb_array_elements over the list (awa.list_lane), whose row estimate
-- does not depend on its length: a source estimated by its argument (generate_series) made the
-- cached plan look dearer than one for each call's values, and the statement was planned again
-- at every commit. jsonb, not json: the list is parsed once, where each ->> of a json value
-- parses its text again. The list is one setting since migration 0037 (three arrays and the
-- keys before): each setting read or written is an expression of its own, set up again in
-- every transaction.
--
-- An error here aborts the commit: it is raised again naming the job and queue, with the
-- original SQLSTATE, so the caller's atomic() block fails with a clear message and its rows
-- roll back with the jobs.
CREATE OR REPLACE FUNCTION awa.publish_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- The lane's key in awa.published: its key in the list of lanes (awa.list_lane), which
    -- only ever starts an entry ';<key>=<lane_seq>' (migration 0037; the lane's sequence name
    -- before, an md5 more per lane).
    v_lane constant text := json_build_array(NEW.queue, NEW.priority, NEW.shard)::text;
    v_published text := coalesce(current_setting('awa.published', true), '');
    v_at constant integer := position(';' || v_lane || '=' IN v_published);
    v_listed boolean;
    v_last_seq bigint;
    v_written record;
BEGIN
    -- The newest entry of a lane comes first (entries are prepended below).
    IF v_at > 0 AND NEW.lane_seq <= split_part(substr(v_published, v_at + length(v_lane) + 2),
                                               ';', 1)::bigint THEN
        RETURN NULL;
    END IF;
    -- This row's lane, if nothing listed it (a row written by raw SQL or a promotion).
    v_listed := awa.list_lane(NEW.queue, NEW.priority, NEW.shard);
    -- Every row this transaction wrote took its lane_seq from this session before now.
    v_last_seq := currval('awa.lane_seq');
    BEGIN
        -- A loop over the rows the INSERT returns, which PL/pgSQL's INTO cannot take: its body
        -- is assignments, evaluated without an executor run, and a NOTIFY while a worker waits.
        FOR v_written IN
            INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                          first_seq, last_seq)
            SELECT l.queue, l.priority, l.shard,
                   nextval(coalesce(to_regclass('awa.' || l.name),
                                    awa.create_lane(l.queue, l.priority, l.shard))),
                   NEW.ready_slot, NEW.batch, NEW.lane_seq, v_last_seq
              -- Each lane's lock before its position: a drawn position is always covered by it.
              FROM (SELECT e.queue, e.priority, e.shard,
                           awa.lane_sequence_name(e.queue, e.priority, e.shard) AS name,
                           pg_advisory_xact_lock_shared(
                               1096237388, awa.lane_lock_key(e.queue, e.priority, e.shard))
                      FROM (SELECT k ->> 0 AS queue, (k ->> 1)::smallint AS priority,
                                   (k ->> 2)::smallint AS shard
                              FROM jsonb_array_elements(
                                  ('[' || substr(current_setting('awa.lanes'), 2) || ']')::jsonb)
                                   AS k) AS e
                    OFFSET 0) AS l
            RETURNING queue, priority, shard,
                      pg_try_advisory_xact_lock_shared(1096237385, hashtext(queue)) AS unwatched
        LOOP
            v_published := ';' || json_build_array(v_written.queue, v_written.priority,
                                                   v_written.shard)::text
                           || '=' || v_last_seq || v_published;
            IF NOT v_written.unwatched THEN
                PERFORM pg_notify('awa', v_written.queue);
            END IF;
        END LOOP;
        v_published := set_config('awa.published', v_published, true);
        v_published := set_config('awa.lanes', '', true);
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'awa: could not publish job % of queue % at commit: %', NEW.job_id,
                        NEW.queue, SQLERRM
              USING ERRCODE = SQLSTATE;
    END;
    RETURN NULL;
END
$$;

-- Puts a lane on the transaction's list of lanes to publish (migration 0035, #32), so the
-- commit's first firing publishes every lane in one statement. The list is one setting,
-- awa.lanes (migration 0037): each lane's key, [queue, priority, shard] as JSON, after a comma,
-- which that statement reads as a JSON array, and by which a lane already listed is found. A
-- JSON string cannot hold an unescaped quote, so '["' only ever starts a key. A lane is listed
-- once per transaction: its later jobs only look it up. awa.enqueue_job lists each job's lane,
-- a COPY's reservation (reserve_ready_batch) its batch's (migration 0036), so a transaction
-- mixing both publishes in one statement too, and awa.publish_ready its own row's. SQL, one
-- expression: the planner inlines it into the caller's expression, so a call is neither a
-- PL/pgSQL function's set-up nor a statement. True when it listed the lane, false when the lane
-- was listed already. The list only batches: a row whose lane it misses (a COPY, a promotion,
-- raw SQL) announces, and its own firing publishes the lane.
CREATE OR REPLACE FUNCTION awa.list_lane(p_queue text, p_priority smallint, p_shard smallint)
RETURNS boolean LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN position(json_build_array(p_queue, p_priority, p_shard)::text
                              IN coalesce(current_setting('awa.lanes', true), '')) = 0
                THEN set_config('awa.lanes',
                                coalesce(current_setting('awa.lanes', true), '') || ','
                                || json_build_array(p_queue, p_priority, p_shard)::text,
                                true) <> ''
                ELSE false END
$$;

-- Enqueues one job inside the caller's transaction and returns its id. A future run_at goes to
-- the deferred backlog; anything else is appended to its lane as an immutable ready row, which
-- the transaction publishes when it commits (awa.publish_ready), and its lane goes on the
-- transaction's list of lanes to publish (awa.list_lane). Nothing here waits for, or locks
-- against, another producer.
CREATE OR REPLACE FUNCTION awa.enqueue_job(
    p_kind text, p_queue text, p_priority smallint, p_args jsonb, p_max_attempts integer,
    p_run_at timestamptz, p_metadata jsonb, p_tags text[]
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_job_id bigint := nextval('awa.job_id_seq');
    v_slot record;
    v_shard smallint;
    v_listed boolean;
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
    v_shard := awa.enqueue_shard(p_queue, p_metadata ->> 'awa:ordering_key');
    INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot, ready_generation,
                                   job_id, kind, args, attempt, run_lease, max_attempts, run_at,
                                   created_at, metadata, tags, errors, announce)
    VALUES (p_queue, p_priority, v_shard, nextval('awa.lane_seq'), v_slot.slot,
            v_slot.generation, v_job_id, p_kind, p_args, 0, 0, p_max_attempts,
            coalesce(p_run_at, now()), now(), p_metadata, p_tags, '[]', true);
    -- An assignment, not a statement: PL/pgSQL evaluates it without an executor run.
    v_listed := awa.list_lane(p_queue, p_priority, v_shard);
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
    v_lane := awa.lane_sequence_name(p_queue, p_priority, v_shard);
    v_lock_key := awa.lane_lock_key(p_queue, p_priority, v_shard);
    -- The ring's current slot, the row and its publication in one statement (migration 0037):
    -- the row is written when the outer INSERT reads it, and the lane's lock is taken in a
    -- subquery that is not flattened, so both come before the position is drawn in the outer
    -- row; the wake lock's test comes after it (RETURNING runs once the row is written). The
    -- slot is not pinned (awa.producer_slot): the transaction's later rows, if it goes on,
    -- publish themselves from their own slot. STRICT: a ring cursor without a row would write
    -- nothing, which must fail, not return an id.
    WITH ready AS (
        INSERT INTO awa.ready_entries (queue, priority, shard, lane_seq, ready_slot,
                                       ready_generation, job_id, kind, args, attempt, run_lease,
                                       max_attempts, run_at, created_at, metadata, tags, errors,
                                       announce)
        SELECT p_queue, p_priority, v_shard, v_lane_seq, r.slot, r.generation, v_job_id, p_kind,
               p_args, 0, 0, p_max_attempts, coalesce(p_run_at, now()), now(), p_metadata,
               p_tags, '[]', false
          FROM awa.queue_ring_rotations r ORDER BY r.generation DESC LIMIT 1
        RETURNING ready_slot
    )
    INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                  first_seq, last_seq)
    SELECT p_queue, p_priority, v_shard,
           nextval(coalesce(to_regclass('awa.' || v_lane),
                            awa.create_lane(p_queue, p_priority, v_shard))),
           ready.ready_slot, pg_current_xact_id(), v_lane_seq, v_lane_seq
      FROM ready,
           (SELECT pg_advisory_xact_lock_shared(1096237388, v_lock_key) OFFSET 0) AS lane_lock
    RETURNING pg_try_advisory_xact_lock_shared(1096237385, hashtext(p_queue))
         INTO STRICT v_unwatched;
    IF NOT v_unwatched THEN
        PERFORM pg_notify('awa', p_queue);
    END IF;
    RETURN v_job_id;
END
$$;
