-- Migration 0038 (#32): a receipt no longer writes an index entry that no statement reads.
-- The BRIN index on claim_receipts.deadline_at bounded the deadline scan of awa.find_rescuable
-- until migration 0010 made deadlines the worker's (a lease-less attempt past its deadline is
-- rescued as stale, by claimed_at); since then no statement filters on deadline_at, and every
-- claimed row still paid its insert.
DROP INDEX awa.claim_receipts_deadline_at;
