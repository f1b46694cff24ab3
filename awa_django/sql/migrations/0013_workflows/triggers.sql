-- A workflow step leaving the dead-letter queue, checked when the deleting transaction commits
-- (awa.workflow_dead_letter_gone): only steps queue an event, and only DLQ deletes fire it.
CREATE CONSTRAINT TRIGGER workflow_dead_letter_gone AFTER DELETE ON awa.dlq_entries
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.metadata ? 'awa:workflow')
    EXECUTE FUNCTION awa.workflow_dead_letter_gone();
