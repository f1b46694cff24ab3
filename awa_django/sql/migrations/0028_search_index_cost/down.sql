-- Reverse of migration 0028_search_index_cost: the search indexes' pending-list limit and the
-- ready partitions' autovacuum thresholds back to the server's settings.
DO $$
DECLARE
    relation regclass;
BEGIN
    FOR relation IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent IN ('awa.ready_entries_args'::regclass,
                               'awa.ready_entries_tags'::regclass)
    LOOP
        EXECUTE format('ALTER INDEX %s RESET (gin_pending_list_limit)', relation);
    END LOOP;
    FOR relation IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent = 'awa.ready_entries'::regclass
    LOOP
        EXECUTE format('ALTER TABLE %s RESET (autovacuum_vacuum_insert_threshold,'
                       ' autovacuum_vacuum_insert_scale_factor)', relation);
    END LOOP;
END
$$;
ALTER INDEX awa.deferred_jobs_args RESET (gin_pending_list_limit);
ALTER INDEX awa.deferred_jobs_tags RESET (gin_pending_list_limit);
