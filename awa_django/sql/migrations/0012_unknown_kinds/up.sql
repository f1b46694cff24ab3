-- The jobs that wait for a worker that knows their kind (awa_django.core.unknown_kinds): each
-- try a worker could not run puts its job back as retryable with an UnknownJobKind error as its
-- last entry. awa_queues, awa.queues.stats() and the admin count them per queue and kind
-- (query kinds_nobody_runs) through this partial index, which holds only them: usually none,
-- and an enqueue, retry or snooze pays one predicate on its row. Building it takes a SHARE lock
-- on the table (writes wait, reads go on) for as long as the build lasts.
CREATE INDEX deferred_jobs_unknown_kind ON awa.deferred_jobs (queue, kind)
    WHERE state = 'retryable' AND errors -> -1 ->> 'type' = 'awa_django.exceptions.UnknownJobKind';
