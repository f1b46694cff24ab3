-- Reverse of 0026_commit_publish: awa.publish_ready as 0001 defined it, publishing a lane in
-- three statements at commit (the lane lock, the lane_commits row, the record in
-- awa.published). The other definitions of functions/enqueue.sql are the ones 0018 had.

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
-- An error here aborts the commit: it is raised again naming the job and queue, with the
-- original SQLSTATE, so the caller's atomic() block fails with a clear message and its rows
-- roll back with the jobs.
CREATE OR REPLACE FUNCTION awa.publish_ready() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    -- The lane's commit sequence, and its key in awa.published.
    v_lane constant text := awa.lane_sequence_name(NEW.queue, NEW.priority, NEW.shard);
    v_published constant text := coalesce(current_setting('awa.published', true), '');
    v_at constant integer := position(';' || v_lane || '=' IN v_published);
    v_entry text;
    v_last_seq bigint;
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
        -- The lock before the position: a drawn position is always covered by it.
        PERFORM pg_advisory_xact_lock_shared(
            1096237388, awa.lane_lock_key(NEW.queue, NEW.priority, NEW.shard));
        INSERT INTO awa.lane_commits (queue, priority, shard, commit_seq, ready_slot, batch,
                                      first_seq, last_seq)
        VALUES (NEW.queue, NEW.priority, NEW.shard,
                nextval(coalesce(to_regclass('awa.' || v_lane),
                                 awa.create_lane(NEW.queue, NEW.priority, NEW.shard))),
                NEW.ready_slot, NEW.batch, NEW.lane_seq, v_last_seq);
        IF NOT pg_try_advisory_xact_lock_shared(1096237385, hashtext(NEW.queue)) THEN
            PERFORM pg_notify('awa', NEW.queue);
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'awa: could not publish job % of queue % at commit: %', NEW.job_id,
                        NEW.queue, SQLERRM
              USING ERRCODE = SQLSTATE;
    END;
    PERFORM set_config('awa.published',
                       CASE WHEN v_at > 0
                            THEN replace(v_published, ';' || v_entry,
                                         ';' || v_lane || '=' || v_last_seq)
                            ELSE v_published || ';' || v_lane || '=' || v_last_seq END,
                       true);
    RETURN NULL;
END
$$;
