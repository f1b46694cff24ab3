-- Where the search indexes' pending lists are merged (docs/admin.md, "Search"; #32, #36).
--
-- An enqueue that writes arguments or tags appends one entry per row to the pending list of a
-- GIN index of migration 0024 (fastupdate): the cheapest index write there is, and the one the
-- search needs. The list is merged into the index in bulk, by (auto)vacuum, or by the insert
-- that finds it past gin_pending_list_limit, which then merges the whole list inside the
-- enqueuing statement. Under steady enqueue traffic the ring's ready partitions, insert only,
-- are vacuumed only after a fifth of their rows is new, so on a large slot that limit (4 MB by
-- default) was reached first and enqueues paid the merges. Here the merge is moved off the
-- enqueue:
--   * autovacuum visits a ready partition after a fixed number of new rows, whatever its size,
--     merging the pending lists of its indexes (a vacuum of an insert-only partition reads
--     only the pages written since the last one);
--   * the limit on the indexes an enqueue writes (the ready ring's and the backlog's arguments
--     and tags) is raised well above what accumulates between two such vacuums, so that an
--     enqueue merges only when autovacuum falls far behind. A search reads the whole pending
--     list of each index it uses, so the limit also bounds that read.
-- Setting either option takes a SHARE UPDATE EXCLUSIVE lock: enqueues and claims go on.
DO $$
DECLARE
    relation regclass;
BEGIN
    -- The ring's partitions are created once, by migration 0001, and never again.
    FOR relation IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent IN ('awa.ready_entries_args'::regclass,
                               'awa.ready_entries_tags'::regclass)
    LOOP
        EXECUTE format('ALTER INDEX %s SET (gin_pending_list_limit = 32768)', relation);
    END LOOP;
    FOR relation IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent = 'awa.ready_entries'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_vacuum_insert_threshold = 100000,'
                       ' autovacuum_vacuum_insert_scale_factor = 0)', relation);
    END LOOP;
END
$$;
ALTER INDEX awa.deferred_jobs_args SET (gin_pending_list_limit = 32768);
ALTER INDEX awa.deferred_jobs_tags SET (gin_pending_list_limit = 32768);
