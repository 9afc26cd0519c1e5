-- Event ledger: publish with atomic fan-out, subscribers, admin reads, replay,
-- retention. $1 is always the clock override. Delivery jobs are source
-- 'event', kind = subscriber name, payload NULL (the body lives in the ledger).

-- name: event_publish
-- $2 id, $3 type, $4 aggregate_type, $5 aggregate_id, $6 version,
-- $7 occurred_at (NULL = now), $8 payload, $9 meta, $10 channel.
-- Returns the number of deliveries fanned out (one per registered subscriber);
-- the fan-out lives in azync_publish_event (migrations 0004, 0012). On a caller's own
-- connection (publish_tx) the driver names the function with the store's
-- schema, since that connection's search path is the caller's.
SELECT azync_publish_event($2, $3, $4, $5, $6,
                           coalesce($7::timestamptz, $1::timestamptz, now()), $8,
                           $9::jsonb, $10, coalesce($1::timestamptz, now())) AS delivered

-- name: event_dequeue
-- Like job_dequeue, for source 'event': also returns the ledger record as ev_*.
-- $2 kind (subscriber), $3 limit, $4 lease, $5 default_max_attempts, $6 override_default
-- A delivery of an ordered subscriber (order_key set) is leased only while no
-- delivery of its key is active and none earlier in publish order is still to
-- run (pending, or scheduled for its retry): across every worker, a key has at
-- most one delivery in flight and its events run in publish order. The probes
-- use azync_jobs_event_order and azync_jobs_event_order_active (migration 0019).
WITH picked AS (
    SELECT j.id FROM azync_jobs j
    WHERE j.state = 'pending' AND j.source = 'event' AND j.kind = $2
      AND j.run_at <= coalesce($1::timestamptz, now())
      AND (j.order_key IS NULL OR (
          NOT EXISTS (
              SELECT 1 FROM azync_jobs a
              WHERE a.kind = j.kind AND a.order_key = j.order_key
                AND a.order_seq < j.order_seq
                AND a.state IN ('pending', 'scheduled', 'active'))
          AND NOT EXISTS (
              SELECT 1 FROM azync_jobs a
              WHERE a.kind = j.kind AND a.order_key = j.order_key
                AND a.state = 'active')))
    ORDER BY j.run_at, j.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), up AS (
    UPDATE azync_jobs j
    SET state = 'active',
        attempt = j.attempt + 1,
        lease_token = azync_lease_token(),
        lease_until = coalesce($1::timestamptz, now()) + $4::interval,
        started_at = coalesce($1::timestamptz, now()),
        updated_at = coalesce($1::timestamptz, now()),
        max_attempts = CASE
            WHEN j.max_attempts_explicit THEN j.max_attempts
            WHEN j.started_at IS NULL AND $6::boolean THEN $5::int
            WHEN j.max_attempts <= 0 THEN $5::int
            ELSE j.max_attempts END
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*
)
SELECT up.*, e.type AS ev_type, e.aggregate_type AS ev_aggregate_type,
       e.aggregate_id AS ev_aggregate_id, e.version AS ev_version,
       e.occurred_at AS ev_occurred_at, e.payload AS ev_payload, e.meta AS ev_meta
FROM up LEFT JOIN azync_events e ON e.id = up.event_id

-- name: event_register_subscriber
-- $2 name, $3 event_type, $4 max_attempts, $5 ordered (per key; applies to
-- deliveries created from then on)
INSERT INTO azync_subscribers AS s (name, event_type, max_attempts, ordered,
                                    created_at, updated_at)
VALUES ($2, $3, $4, $5, coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
ON CONFLICT (event_type, name)
    DO UPDATE SET max_attempts = EXCLUDED.max_attempts, ordered = EXCLUDED.ordered,
                  updated_at = EXCLUDED.updated_at

-- name: event_subscribers
-- $2 event_type ('' = every type), ordered by event type then name.
SELECT name, event_type, max_attempts, ordered, created_at, updated_at
FROM azync_subscribers
WHERE ($2 = '' OR event_type = $2) AND ($1::timestamptz IS NULL OR true)
ORDER BY event_type, name

-- name: event_delete_subscriber
-- $2 name, $3 event_type ('' = every registration of name)
WITH d AS (
    DELETE FROM azync_subscribers
    WHERE name = $2 AND ($3 = '' OR event_type = $3) AND ($1::timestamptz IS NULL OR true)
    RETURNING 1
)
SELECT count(*) FROM d

-- name: event_list
-- $2 type ('' = all), $3 undispatched (NULL = either), $4 since, $5 until
-- (occurred_at in [since, until); NULL = open), $6 offset, $7 limit. Newest
-- first. One row per event of the page with the total; a single row with a
-- NULL id when the page is empty.
WITH m AS (
    SELECT e.*, (SELECT count(*) FROM azync_jobs j WHERE j.event_id = e.id) AS deliveries
    FROM azync_events e
    WHERE ($2 = '' OR e.type = $2)
      AND ($4::timestamptz IS NULL OR e.occurred_at >= $4::timestamptz)
      AND ($5::timestamptz IS NULL OR e.occurred_at < $5::timestamptz)
      AND ($1::timestamptz IS NULL OR true)
), f AS (
    SELECT * FROM m WHERE $3::boolean IS NULL OR (m.deliveries = 0) = $3::boolean
), total AS (
    SELECT count(*) AS total FROM f
)
SELECT total.total, p.*
FROM total LEFT JOIN LATERAL (
    SELECT * FROM f ORDER BY f.occurred_at DESC, f.id OFFSET $6 LIMIT $7
) p ON true

-- name: event_get
-- $2 id
SELECT e.*, (SELECT count(*) FROM azync_jobs j WHERE j.event_id = e.id) AS deliveries
FROM azync_events e
WHERE e.id = $2 AND ($1::timestamptz IS NULL OR true)

-- name: event_ops_stats
SELECT
    (SELECT count(*) FROM azync_events e
     WHERE NOT EXISTS (SELECT 1 FROM azync_jobs j WHERE j.event_id = e.id)) AS undispatched,
    (SELECT count(*) FROM azync_events
     WHERE occurred_at >= coalesce($1::timestamptz, now()) - interval '24 hours') AS total_24h,
    (SELECT count(DISTINCT type) FROM azync_events
     WHERE occurred_at >= coalesce($1::timestamptz, now()) - interval '24 hours') AS types_24h,
    (SELECT count(*) FROM azync_subscribers) AS subscribers

-- name: event_replay
-- $2 subscriber ('' = every registered subscriber of each event's type),
-- $3 event_type ('' = all), $4 event_id (NULL = any), $5 since, $6 until
-- (occurred_at in [since, until)), $7 limit on events (<= 0 = no limit),
-- $8 channel. Fresh pending deliveries flagged replay, for the subscribers
-- registered now; those of an ordered subscriber join their key's order as of
-- the replay, in the order the events occurred.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), evs AS (
    SELECT id, type, aggregate_id, occurred_at FROM azync_events
    WHERE ($3 = '' OR type = $3)
      AND ($4::uuid IS NULL OR id = $4::uuid)
      AND ($5::timestamptz IS NULL OR occurred_at >= $5::timestamptz)
      AND ($6::timestamptz IS NULL OR occurred_at < $6::timestamptz)
    ORDER BY occurred_at, id
    LIMIT CASE WHEN $7::int > 0 THEN $7::int END
), ins AS (
    INSERT INTO azync_jobs (id, source, kind, state, run_at, max_attempts,
                            max_attempts_explicit, event_id, replay, enqueued_at, updated_at,
                            order_key, order_seq)
    SELECT gen_random_uuid(), 'event', s.name, 'pending', c.t, s.max_attempts,
           s.max_attempts > 0, evs.id, true, c.t, c.t,
           CASE WHEN s.ordered THEN evs.aggregate_id END,
           CASE WHEN s.ordered THEN nextval('azync_event_order_seq') END
    FROM evs JOIN azync_subscribers s ON s.event_type = evs.type, clock c
    WHERE $2 = '' OR s.name = $2
    ORDER BY evs.occurred_at, evs.id
    RETURNING kind, enqueued_at
), stat AS (
    SELECT azync_job_count(min(enqueued_at),
                           array_agg(ROW('event', kind, 1, 0, 0, 0)::azync_job_delta))
    FROM ins
), wake AS (
    SELECT pg_notify($8, 'event:' || kind) FROM (SELECT DISTINCT kind FROM ins) k
)
SELECT (SELECT count(*) FROM ins) AS created, (SELECT count(*) FROM wake) AS woken
WHERE (SELECT count(*) FROM stat) >= 0

-- name: event_retain
-- $2 before, $3 limit: delete up to limit events that occurred before the
-- cutoff and have no non-terminal delivery, cascading to their deliveries.
WITH victims AS (
    SELECT e.id FROM azync_events e
    WHERE e.occurred_at < $2::timestamptz AND ($1::timestamptz IS NULL OR true)
      AND NOT EXISTS (
        SELECT 1 FROM azync_jobs j
        WHERE j.event_id = e.id
          AND j.state NOT IN ('succeeded', 'dead', 'skipped', 'cancelled'))
    ORDER BY e.occurred_at, e.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), d AS (
    DELETE FROM azync_events e USING victims WHERE e.id = victims.id RETURNING 1
)
SELECT count(*) FROM d

-- name: event_delivery_transaction_open
-- $2 delivery job id, $3 lease_token, $4 search_path for the rest of the
-- transaction. Opens a transactional subscriber's delivery: checks it is
-- active under the token (no lock: a frozen attempt must not keep the reaper
-- from handing it on; the ack is the fence that counts), then switches the
-- transaction to the caller's search_path (LOCAL). No row = stale token.
SELECT j.id, set_config('search_path', $4::text, true) AS search_path
FROM azync_jobs j
WHERE j.id = $2 AND j.lease_token = $3 AND j.state = 'active' AND j.source = 'event'
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
