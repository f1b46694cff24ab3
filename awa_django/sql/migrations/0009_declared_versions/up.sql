-- The values behind every declared descriptor version (docs/admin.md, "Descriptors"). A runtime
-- reports only the hash of what it declares for each queue and job kind, and the descriptor
-- tables hold the last version written, so a drift badge could name the values of at most that
-- version and the one the admin's own code declares. Each worker records each of its versions
-- here once (an insert that finds the row writes nothing, so snapshots leave no dead tuples);
-- the leader's runtime cleanup deletes versions that no runtime row and no stored descriptor
-- declares any more.
CREATE TABLE awa.declared_versions (
    described text NOT NULL CHECK (described IN ('queue', 'kind')),
    name text NOT NULL,
    descriptor_hash text NOT NULL,
    fields jsonb NOT NULL,
    first_declared_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (described, name, descriptor_hash)
);
