-- Leadership leases (contract LeaseElector). $1 is always the clock override.
-- A held row is never locked by a would-be leader (the FOR UPDATE below only
-- sees expired rows), so contenders never wait on a live leader.

-- name: leader_acquire
-- $2 name, $3 holder, $4 ttl: insert the row, or take over an expired one with
-- term + 1. The FOR UPDATE waits for the previous holder's fenced transactions
-- (they hold FOR KEY SHARE) so none of them commits inside the new term.
-- Returns (term, expires_at) when acquired, no row when another holder leads.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), ins AS (
    INSERT INTO azync_leaders (name, holder, term, elected_at, expires_at)
    SELECT $2, $3, 1, t, t + $4::interval FROM clock
    ON CONFLICT (name) DO NOTHING
    RETURNING term, expires_at
), lapsed AS (
    SELECT l.name FROM azync_leaders l, clock
    WHERE l.name = $2 AND l.expires_at <= clock.t
    FOR UPDATE OF l
), taken AS (
    UPDATE azync_leaders l
    SET holder = $3, term = l.term + 1, elected_at = c.t, expires_at = c.t + $4::interval
    FROM lapsed, clock c
    WHERE l.name = lapsed.name
    RETURNING l.term, l.expires_at
)
SELECT term, expires_at FROM ins
UNION ALL
SELECT term, expires_at FROM taken

-- name: leader_cut_off
-- $2 backend pid of a contender waiting in leader_acquire: end the sessions it
-- waits on. Only a lapsed term's fenced transaction (or another contender's
-- takeover) can hold the lapsed row, so nothing live inside its term is cut.
-- Returns (pid, ended) per blocking session.
SELECT b AS pid, pg_terminate_backend(b) AS ended, coalesce($1::timestamptz, now()) AS at
FROM unnest(pg_blocking_pids($2)) AS b

-- name: leader_renew
-- $2 name, $3 term, $4 ttl: extend a lease its holder still holds (not yet
-- expired on the backend clock, same term). No row: the lease is lost.
UPDATE azync_leaders
SET expires_at = coalesce($1::timestamptz, now()) + $4::interval
WHERE name = $2 AND term = $3 AND expires_at > coalesce($1::timestamptz, now())
RETURNING expires_at

-- name: leader_release
-- $2 name, $3 term: expire the lease now so another instance takes it at once
-- (the row and its term stay: terms only grow).
UPDATE azync_leaders
SET expires_at = coalesce($1::timestamptz, now())
WHERE name = $2 AND term = $3 AND expires_at > coalesce($1::timestamptz, now())
RETURNING term

-- name: leader_fence
-- $2 name, $3 term, $4 idle-in-transaction timeout (text, e.g. '2000ms'): the
-- first statement of a fenced transaction. Holds FOR KEY SHARE on the lease
-- row until commit (renewals pass, a takeover waits), and bounds how long the
-- transaction may sit idle so a frozen holder cannot block a takeover for
-- long. No row: this term no longer leads and the transaction must not write.
SELECT set_config('idle_in_transaction_session_timeout', $4, true) AS idle
FROM azync_leaders
WHERE name = $2 AND term = $3 AND expires_at > coalesce($1::timestamptz, now())
FOR KEY SHARE

-- name: leader_get
-- $2 name: the current row of a leadership (holder, term, expiry, held now).
SELECT name, holder, term, elected_at, expires_at,
       expires_at > coalesce($1::timestamptz, now()) AS held
FROM azync_leaders WHERE name = $2

-- The worker registry (migration 0018): one row per worker, written only by
-- that worker; reads filter out rows whose expiry passed.

-- name: worker_register
-- $2 worker id, $3 host, $4 pid, $5 workflow names text[], $6 ttl interval,
-- $7 task queues text[], $8 activity kinds text[]: insert or refresh this
-- worker's own row (live until now + ttl).
INSERT INTO azync_workers AS w (id, host, pid, workflows, started_at, seen_at, expires_at,
                                task_queues, activities)
VALUES ($2, $3, $4, $5, coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()),
        coalesce($1::timestamptz, now()) + $6::interval, $7, $8)
ON CONFLICT (id) DO UPDATE
SET workflows = EXCLUDED.workflows, seen_at = EXCLUDED.seen_at,
    expires_at = EXCLUDED.expires_at, task_queues = EXCLUDED.task_queues,
    activities = EXCLUDED.activities

-- name: worker_unregister
-- $2 worker id: a worker stopping removes its own row.
DELETE FROM azync_workers WHERE id = $2 AND ($1::timestamptz IS NULL OR true)

-- name: worker_live_for_workflow
-- $2 workflow name, $3 task queue: the live workers registering it on that
-- queue (expiry not passed).
SELECT count(*) AS n FROM azync_workers
WHERE workflows @> ARRAY[$2::text] AND task_queues @> ARRAY[$3::text]
  AND expires_at > coalesce($1::timestamptz, now())

-- name: identity_take_back
-- $2 the identity's token prefix (8 hex digits), $3 its name: a worker
-- that just claimed an identity expires the leases its previous incarnation
-- held under it (jobs by token prefix, leaderships by holder "<name>:<pid>"),
-- so the reaper hands them back at its next tick instead of after their lease.
-- Returns (jobs, leaderships) expired.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), jobs AS (
    UPDATE azync_jobs j SET lease_until = c.t
    FROM clock c
    WHERE j.state = 'active' AND j.lease_until > c.t AND left(j.lease_token::text, 8) = $2
    RETURNING 1
), leaders AS (
    UPDATE azync_leaders l SET expires_at = c.t
    FROM clock c
    WHERE l.expires_at > c.t AND left(l.holder, length($3) + 1) = $3 || ':'
    RETURNING 1
)
SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM leaders) AS leaderships
