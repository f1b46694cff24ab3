-- The producer designs compared for commit-time lane positions (docs/architecture.md, "Decision:
-- commit-time lane positions"), reduced to what a producer does: write the job's row and give
-- it a lane position, nothing claims them. proto.mode picks the design:
--
--   call_lock     the lane's exclusive lock and the position at the enqueue call, held to the
--                 end of the transaction (awa_django before the change), NOTIFY at commit;
--   commit_lock   the row at the call; at commit a deferred trigger takes the exclusive locks of
--                 the transaction's lanes in sorted order and draws positions from one global
--                 sequence, NOTIFY;
--   commit_shared the row at the call; at commit the trigger takes each lane's lock shared and
--                 draws the position from the lane's own sequence, no NOTIFY (what awa_django
--                 does when no worker waits);
--   commit_shared_notify  the same with a NOTIFY at every commit.
CREATE SCHEMA proto;
CREATE SEQUENCE proto.row_seq CACHE 64;
CREATE SEQUENCE proto.global_seq CACHE 1;
CREATE SEQUENCE proto.lane_bench CACHE 1;
CREATE SEQUENCE proto.lane_bench2 CACHE 1;
CREATE TABLE proto.rows (
    queue text NOT NULL,
    lane_seq bigint NOT NULL,
    batch xid8 NOT NULL DEFAULT pg_current_xact_id(),
    announce boolean NOT NULL DEFAULT false,
    args jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, lane_seq)
);
CREATE TABLE proto.positions (
    queue text NOT NULL,
    commit_seq bigint NOT NULL,
    batch xid8 NOT NULL,
    PRIMARY KEY (queue, commit_seq)
);

CREATE FUNCTION proto.enqueue(p_mode text, p_queue text, p_args jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_pending text := coalesce(current_setting('proto.pending', true), '');
BEGIN
    IF p_mode = 'call_lock' THEN
        PERFORM pg_advisory_xact_lock(1, hashtext(p_queue));
        INSERT INTO proto.rows (queue, lane_seq, args)
        VALUES (p_queue, nextval('proto.global_seq'), p_args);
        PERFORM pg_notify('proto', p_queue);
        RETURN;
    END IF;
    INSERT INTO proto.rows (queue, lane_seq, args, announce)
    VALUES (p_queue, nextval('proto.row_seq'), p_args, true);
    IF position(';' || p_queue || ';' IN ';' || v_pending) = 0 THEN
        PERFORM set_config('proto.pending', v_pending || p_queue || ';', true);
        PERFORM set_config('proto.mode', p_mode, true);
    END IF;
END
$$;

CREATE FUNCTION proto.publish() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_pending constant text := coalesce(current_setting('proto.pending', true), '');
    v_mode constant text := current_setting('proto.mode');
    v_queue text;
BEGIN
    IF v_pending = '' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('proto.pending', '', true);
    FOR v_queue IN SELECT q FROM unnest(string_to_array(rtrim(v_pending, ';'), ';')) q ORDER BY 1
    LOOP
        IF v_mode = 'commit_lock' THEN
            PERFORM pg_advisory_xact_lock(1, hashtext(v_queue));
            INSERT INTO proto.positions
            VALUES (v_queue, nextval('proto.global_seq'), pg_current_xact_id());
        ELSE
            PERFORM pg_advisory_xact_lock_shared(1, hashtext(v_queue));
            INSERT INTO proto.positions
            VALUES (v_queue, nextval(('proto.lane_' || v_queue)::regclass), pg_current_xact_id());
        END IF;
        IF v_mode <> 'commit_shared' THEN
            PERFORM pg_notify('proto', v_queue);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER publish AFTER INSERT ON proto.rows
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.announce)
    EXECUTE FUNCTION proto.publish();
