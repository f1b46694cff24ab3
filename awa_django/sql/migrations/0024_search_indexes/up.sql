-- Indexes for the operator console's content search (docs/admin.md, "Search"): arguments by
-- JSON containment, tags, and error text, answered from every retained job instead of a
-- bounded scan of the newest ones (issue #36).
--
-- Which rows are indexed, and why it stays off the hot path: an index entry costs a write
-- only where a row can match, so each index is partial.
--   * arguments: GIN jsonb_path_ops (one hashed entry per leaf path; it answers @>) on every
--     table holding a job's body, skipping jobs without arguments. This is the one index a
--     plain enqueue pays for; GIN's fastupdate (on by default) makes that an append to the
--     index's pending list, merged in bulk by (auto)vacuum.
--   * tags: GIN on the text[] of the rows that have tags; an untagged enqueue adds nothing.
--   * error text: pg_trgm GIN on awa.error_text(...) of the rows that hold an error: closures
--     with an error (a completed closure, the drain's write, adds nothing), ready rows of a
--     retry (a fresh enqueue's errors are '[]'), cancel tombstones, the backlog, the history
--     kept past its slot and the DLQ.
-- On the partitioned tables the indexes are declared on the parent, so every partition has
-- them. Building them takes a SHARE lock on each table for as long as the build lasts (writes
-- wait; reads go on), as 0008 did.

-- pg_trgm is a trusted extension (PostgreSQL 13+): the database owner, or any role with CREATE
-- on the database, may create it. Without it the migration stops with a message saying what to
-- ask for, rather than PostgreSQL's bare permission error.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION pg_trgm;
        EXCEPTION
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'awa_django migration 0024 needs the pg_trgm extension, and this role may not create it'
                    USING HINT = 'Ask a superuser (or the database owner) to run CREATE EXTENSION pg_trgm; in this database, then migrate again.';
            WHEN undefined_file THEN
                RAISE EXCEPTION 'awa_django migration 0024 needs the pg_trgm extension, which this PostgreSQL server does not have'
                    USING HINT = 'Install the PostgreSQL contrib modules (Debian/Ubuntu: postgresql-contrib), then migrate again.';
        END;
    END IF;
END
$$;

-- The searchable text of an error list (or of one error object): the message, type and cancel
-- reason of each error, one per line. Tracebacks are left out, as the search leaves them out.
-- IMMUTABLE, since indexes store its result; a search matching this text is checked again,
-- field by field, against the job's current record (storage/browse.py), so a match across two
-- lines only costs a check.
CREATE FUNCTION awa.error_text(errors jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg(concat_ws(E'\n', e ->> 'message', e ->> 'type', e ->> 'reason'), E'\n')
      FROM jsonb_array_elements(CASE jsonb_typeof(errors)
                                     WHEN 'array' THEN errors
                                     WHEN 'object' THEN jsonb_build_array(errors)
                                     ELSE '[]'::jsonb END) e
$$;

CREATE INDEX ready_entries_args ON awa.ready_entries USING gin (args jsonb_path_ops)
    WHERE args <> '{}'::jsonb;
CREATE INDEX ready_entries_tags ON awa.ready_entries USING gin (tags) WHERE tags <> '{}';
CREATE INDEX deferred_jobs_args ON awa.deferred_jobs USING gin (args jsonb_path_ops)
    WHERE args <> '{}'::jsonb;
CREATE INDEX deferred_jobs_tags ON awa.deferred_jobs USING gin (tags) WHERE tags <> '{}';
CREATE INDEX terminal_history_args ON awa.terminal_history USING gin (args jsonb_path_ops)
    WHERE args <> '{}'::jsonb;
CREATE INDEX terminal_history_tags ON awa.terminal_history USING gin (tags) WHERE tags <> '{}';
CREATE INDEX dlq_entries_args ON awa.dlq_entries USING gin (args jsonb_path_ops)
    WHERE args <> '{}'::jsonb;
CREATE INDEX dlq_entries_tags ON awa.dlq_entries USING gin (tags) WHERE tags <> '{}';

-- The trigram operator class lives in the schema pg_trgm was created in (wherever a project
-- put it), so these are built with its name read from the catalog.
DO $$
DECLARE
    trgm text := (SELECT quote_ident(n.nspname) || '.gin_trgm_ops'
                    FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
                   WHERE x.extname = 'pg_trgm');
BEGIN
    EXECUTE format('CREATE INDEX ready_entries_error_text ON awa.ready_entries'
                   ' USING gin (awa.error_text(errors) %s) WHERE errors <> ''[]''::jsonb', trgm);
    EXECUTE format('CREATE INDEX done_entries_error_text ON awa.done_entries'
                   ' USING gin (awa.error_text(error) %s) WHERE error IS NOT NULL', trgm);
    EXECUTE format('CREATE INDEX ready_tombstones_reason ON awa.ready_tombstones'
                   ' USING gin (reason %s)', trgm);
    EXECUTE format('CREATE INDEX deferred_jobs_error_text ON awa.deferred_jobs'
                   ' USING gin (awa.error_text(errors) %s) WHERE errors <> ''[]''::jsonb', trgm);
    EXECUTE format('CREATE INDEX terminal_history_error_text ON awa.terminal_history'
                   ' USING gin (awa.error_text(errors) %s) WHERE errors <> ''[]''::jsonb', trgm);
    EXECUTE format('CREATE INDEX dlq_entries_error_text ON awa.dlq_entries'
                   ' USING gin (awa.error_text(errors) %s) WHERE errors <> ''[]''::jsonb', trgm);
END
$$;
