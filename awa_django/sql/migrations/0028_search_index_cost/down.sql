-- Reverse of migration 0028_search_index_cost: the pending-list limit of the search indexes an
-- enqueue writes back to the server's setting.
DO $$
DECLARE
    idx regclass;
BEGIN
    FOR idx IN
        SELECT i.inhrelid::regclass FROM pg_inherits i
         WHERE i.inhparent IN ('awa.ready_entries_args'::regclass,
                               'awa.ready_entries_tags'::regclass)
    LOOP
        EXECUTE format('ALTER INDEX %s RESET (gin_pending_list_limit)', idx);
    END LOOP;
END
$$;
ALTER INDEX awa.deferred_jobs_args RESET (gin_pending_list_limit);
ALTER INDEX awa.deferred_jobs_tags RESET (gin_pending_list_limit);
