-- Reverse of migration 0009_declared_versions: the recorded versions dropped, so that migration
-- 0001's reverse finds only the objects it created.
DROP TABLE awa.declared_versions;
