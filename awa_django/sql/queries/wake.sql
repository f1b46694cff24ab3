-- Wake-ups: the locks a worker holds, on a session of its own, while it waits for work on a
-- queue (awa_django/worker/wake.py). A producer's commit sends NOTIFY only while one is held
-- (awa.publish_ready). Keys: class 1096237385 ('AWAI') for the wake lock producers test,
-- 1096237399 ('AWAW') for the candidate lock that lets one process per queue take it; object
-- hashtext(queue) for both (queues that hash alike merely share their locks).

-- name: arm_wake
-- Becomes the queue's waiting worker, or says why not: 'armed' (wake lock taken: commits now
-- notify), 'busy' (this session is the candidate but producers are committing to the queue
-- right now: their work is there to claim, then try again) or 'taken' (another session is the
-- candidate: it is woken, and every listener with it). Nested CASEs fix the evaluation order,
-- so the candidate lock is not taken twice (session locks stack).
SELECT CASE
         WHEN NOT (CASE WHEN %(candidate)s::boolean THEN true
                        ELSE pg_try_advisory_lock(1096237399, hashtext(%(queue)s)) END)
           THEN 'taken'
         WHEN pg_try_advisory_lock(1096237385, hashtext(%(queue)s)) THEN 'armed'
         ELSE 'busy'
       END AS state

-- name: release_wake
-- Gives back the queue's wake lock (when held) and candidate lock, and notifies the queue's
-- handover channel: the other processes that sleep on it (they were not the candidate, and
-- producers' notifications do not wake them) claim, and one of them takes over waiting,
-- instead of polling in case this one stopped; also on a clean exit. The locks go at once and
-- the notification at commit, so whoever it wakes finds them free.
SELECT CASE WHEN %(armed)s::boolean
            THEN pg_advisory_unlock(1096237385, hashtext(%(queue)s)) END,
       pg_advisory_unlock(1096237399, hashtext(%(queue)s)),
       pg_notify('awa_handover', %(queue)s)

-- name: disarm_wake
-- Gives back the queue's wake lock only, without a notification: the candidate got work but
-- has slots left, so it stays the queue's candidate (the others keep sleeping) while producers
-- stop notifying until it waits again (arm_wake with candidate true).
SELECT pg_advisory_unlock(1096237385, hashtext(%(queue)s))

-- name: try_session_locks
-- One process's periodic tries, in one round trip (awa_django/core/session_tries.py, #37): the
-- maintenance leader lock (when %(leader_key)s is not null) and the candidate lock of each
-- queue in %(queues)s, which another session held when this one last tried. Says whether it
-- won the leader lock, and which queues' candidate locks it won (a won candidate lock is this
-- session's until release_wake; the queue's dispatcher takes the wake lock with arm_wake).
SELECT CASE WHEN %(leader_key)s::bigint IS NULL THEN false
            ELSE pg_try_advisory_lock(%(leader_key)s::bigint) END AS leader,
       ARRAY(SELECT q FROM unnest(%(queues)s::text[]) AS q
              WHERE pg_try_advisory_lock(1096237399, hashtext(q))) AS candidates
