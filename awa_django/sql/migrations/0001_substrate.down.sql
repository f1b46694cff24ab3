-- Reverses 0001_substrate: the schema owns every object the forward migration created.
DROP SCHEMA awa CASCADE;
