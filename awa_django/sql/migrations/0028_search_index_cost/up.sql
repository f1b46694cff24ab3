-- Where the search indexes' pending lists are merged (docs/admin.md, "What the search indexes
-- cost"; #32, #36).
--
-- An enqueue that writes arguments or tags appends one entry per row to the pending list of a
-- GIN index of migration 0024 (fastupdate): the cheapest index write there is, and the one the
-- search needs. The list is merged into the index in bulk by autovacuum (an autoanalyze of the
-- partition merges it too, after a tenth of its rows is new), or by the insert that finds it
-- past gin_pending_list_limit, which then merges the whole list inside the enqueuing statement.
-- With the server's limit (4 MB by default) a steady bulk producer reached it before
-- autovacuum came, and enqueues paid the merges. The indexes an enqueue writes (the ready
-- ring's and the backlog's arguments and tags) get a limit of their own, well above what
-- accumulates between two autovacuum visits, so that an enqueue merges only when autovacuum
-- falls far behind. A search reads the whole pending list of each index it uses, so the limit
-- also bounds that read. The limit is in kB.
-- Setting it takes a SHARE UPDATE EXCLUSIVE lock on each index: enqueues and claims go on.
DO $$
DECLARE
    idx regclass;
BEGIN
    -- A partitioned index has no storage options: they are set on each partition's index. The
    -- ring's partitions are created once, by migration 0001, and never again.
    FOR idx IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent IN ('awa.ready_entries_args'::regclass,
                               'awa.ready_entries_tags'::regclass)
    LOOP
        EXECUTE format('ALTER INDEX %s SET (gin_pending_list_limit = 16384)', idx);
    END LOOP;
END
$$;
ALTER INDEX awa.deferred_jobs_args SET (gin_pending_list_limit = 16384);
ALTER INDEX awa.deferred_jobs_tags SET (gin_pending_list_limit = 16384);
