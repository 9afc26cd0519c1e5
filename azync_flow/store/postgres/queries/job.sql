-- Queue job lifecycle. $1 is always the clock override: coalesce($1, now()).
-- Stats counters are spread over 8 shards per (source, kind, day).

-- name: job_enqueue
-- $2 id, $3 source, $4 kind, $5 payload, $6 meta, $7 run_at, $8 delay,
-- $9 max_attempts, $10 max_attempts_explicit, $11 idempotency_key, $12 channel
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), ins AS (
    INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                            max_attempts_explicit, idempotency_key, enqueued_at, updated_at)
    SELECT $2, $3, $4,
           CASE WHEN coalesce($7::timestamptz, c.t + $8::interval) > c.t
                THEN 'scheduled' ELSE 'pending' END,
           $5, $6::jsonb, coalesce($7::timestamptz, c.t + $8::interval), $9, $10, $11, c.t, c.t
    FROM clock c
    ON CONFLICT (source, kind, idempotency_key)
        WHERE idempotency_key <> ''
          AND state IN ('pending', 'scheduled', 'active', 'paused', 'blocked', 'waiting', 'uncertain')
        DO NOTHING
    RETURNING state, enqueued_at
), stat AS (
    INSERT INTO azync_job_stats (source, kind, day, shard, enqueued)
    SELECT $3, $4, (enqueued_at AT TIME ZONE 'UTC')::date, (random() * 7)::int, 1 FROM ins
    ON CONFLICT (source, kind, day, shard)
        DO UPDATE SET enqueued = azync_job_stats.enqueued + 1
), wake AS (
    SELECT pg_notify($12, $3 || ':' || $4) FROM ins WHERE state = 'pending'
)
SELECT (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM wake) AS woken

-- name: job_idempotency_reserve
-- $2 source, $3 kind, $4 key, $5 ttl. Returns a row only when the key was free
-- (absent or expired) and is now reserved until now()+ttl.
INSERT INTO azync_idempotency_keys AS k (source, kind, key, expires_at)
VALUES ($2, $3, $4, coalesce($1::timestamptz, now()) + $5::interval)
ON CONFLICT (source, kind, key) DO UPDATE SET expires_at = EXCLUDED.expires_at
    WHERE k.expires_at <= coalesce($1::timestamptz, now())
RETURNING 1

-- name: job_dequeue
-- $2 source, $3 kind, $4 limit, $5 lease, $6 default_max_attempts, $7 override_default
WITH picked AS (
    SELECT id FROM azync_jobs
    WHERE state = 'pending' AND source = $2 AND kind = $3
      AND run_at <= coalesce($1::timestamptz, now())
    ORDER BY run_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
)
UPDATE azync_jobs j
SET state = 'active',
    attempt = j.attempt + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce($1::timestamptz, now()) + $5::interval,
    started_at = coalesce($1::timestamptz, now()),
    updated_at = coalesce($1::timestamptz, now()),
    max_attempts = CASE
        WHEN j.max_attempts_explicit THEN j.max_attempts
        WHEN j.attempt = 0 AND $7::boolean THEN $6::int
        WHEN j.max_attempts <= 0 THEN $6::int
        ELSE j.max_attempts END
FROM picked
WHERE j.id = picked.id
RETURNING j.*

-- name: job_ack
-- $2 id, $3 lease_token
WITH done AS (
    UPDATE azync_jobs
    SET state = 'succeeded', completed_at = coalesce($1::timestamptz, now()),
        lease_until = NULL, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND lease_token = $3 AND state = 'active'
    RETURNING source, kind
), stat AS (
    INSERT INTO azync_job_stats (source, kind, day, shard, processed)
    SELECT source, kind, (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date,
           (random() * 7)::int, 1 FROM done
    ON CONFLICT (source, kind, day, shard)
        DO UPDATE SET processed = azync_job_stats.processed + 1
)
SELECT 1 FROM done

-- name: job_ack_many
-- $2 ids uuid[], $3 lease_tokens uuid[]; returns the ids acked
WITH done AS (
    UPDATE azync_jobs j
    SET state = 'succeeded', completed_at = coalesce($1::timestamptz, now()),
        lease_until = NULL, updated_at = coalesce($1::timestamptz, now())
    FROM unnest($2::uuid[], $3::uuid[]) AS s(id, token)
    WHERE j.id = s.id AND j.lease_token = s.token AND j.state = 'active'
    RETURNING j.id, j.source, j.kind
), stat AS (
    INSERT INTO azync_job_stats (source, kind, day, shard, processed)
    SELECT source, kind, (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date,
           (random() * 7)::int, count(*) FROM done GROUP BY source, kind
    ON CONFLICT (source, kind, day, shard)
        DO UPDATE SET processed = azync_job_stats.processed + EXCLUDED.processed
)
SELECT id FROM done

-- name: job_reschedule
-- $2 id, $3 lease_token, $4 delay, $5 last_error
WITH j AS (
    UPDATE azync_jobs
    SET state = 'scheduled', run_at = coalesce($1::timestamptz, now()) + $4::interval,
        last_error = $5, failed_at = coalesce($1::timestamptz, now()),
        lease_until = NULL, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND lease_token = $3 AND state = 'active'
    RETURNING id, attempt
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, $5, coalesce($1::timestamptz, now()) FROM j
)
SELECT 1 FROM j

-- name: job_dead
-- $2 id, $3 lease_token, $4 last_error
WITH j AS (
    UPDATE azync_jobs
    SET state = 'dead', last_error = $4, failed_at = coalesce($1::timestamptz, now()),
        lease_until = NULL, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND lease_token = $3 AND state = 'active'
    RETURNING id, attempt, source, kind
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, $4, coalesce($1::timestamptz, now()) FROM j
), stat AS (
    INSERT INTO azync_job_stats (source, kind, day, shard, failed)
    SELECT source, kind, (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date,
           (random() * 7)::int, 1 FROM j
    ON CONFLICT (source, kind, day, shard)
        DO UPDATE SET failed = azync_job_stats.failed + 1
)
SELECT 1 FROM j

-- name: job_release
-- $2 id, $3 lease_token
UPDATE azync_jobs
SET state = 'pending', attempt = greatest(attempt - 1, 0), lease_until = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND lease_token = $3 AND state = 'active'
RETURNING 1

-- name: job_extend_lease
-- $2 id, $3 lease_token, $4 lease
UPDATE azync_jobs
SET lease_until = coalesce($1::timestamptz, now()) + $4::interval,
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND lease_token = $3 AND state = 'active'
RETURNING lease_until
