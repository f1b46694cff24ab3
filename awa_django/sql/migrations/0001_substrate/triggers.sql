-- Triggers, created after the functions they call.
-- Part of migration 0001 as released in v0.1.0: never edited (a change is a new migration).

CREATE CONSTRAINT TRIGGER ready_entries_publish AFTER INSERT ON awa.ready_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.announce)
    EXECUTE FUNCTION awa.publish_ready();
