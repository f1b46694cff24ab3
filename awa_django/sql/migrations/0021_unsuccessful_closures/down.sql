DROP INDEX awa.done_entries_unsuccessful;
