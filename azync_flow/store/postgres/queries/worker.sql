-- The worker registry (migration 0018): one row per worker, written only by
-- that worker; reads filter out rows whose expiry passed.

-- name: worker_register
-- $2 worker id, $3 host, $4 pid, $5 workflow names text[], $6 ttl interval:
-- insert or refresh this worker's own row (live until now + ttl).
INSERT INTO azync_workers AS w (id, host, pid, workflows, started_at, seen_at, expires_at)
VALUES ($2, $3, $4, $5, coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()),
        coalesce($1::timestamptz, now()) + $6::interval)
ON CONFLICT (id) DO UPDATE
SET workflows = EXCLUDED.workflows, seen_at = EXCLUDED.seen_at,
    expires_at = EXCLUDED.expires_at

-- name: worker_unregister
-- $2 worker id: a worker stopping removes its own row.
DELETE FROM azync_workers WHERE id = $2 AND ($1::timestamptz IS NULL OR true)

-- name: worker_live_for_workflow
-- $2 workflow name: the live workers registering it (expiry not passed).
SELECT count(*) AS n FROM azync_workers
WHERE workflows @> ARRAY[$2::text] AND expires_at > coalesce($1::timestamptz, now())
