-- Queue job lifecycle. $1 is always the clock override: coalesce($1, now()).
-- Every settle goes through azync_job_settle and every stats write through
-- azync_job_count (migration 0011; an insert of delta rows since 0012).

-- name: job_enqueue
-- $2 id, $3 source, $4 kind, $5 payload, $6 meta, $7 run_at, $8 delay,
-- $9 max_attempts, $10 max_attempts_explicit, $11 idempotency_key, $12 channel,
-- $13 snooze_budget (zero = none), $14 idempotency_ttl (zero = live check only),
-- $15 task_queue, $16 priority, $17 limit_key (NULL: '' when the kind has
-- limits, migration 0028, or a queue job's task queue has, migration 0031,
-- else none).
-- Dedupe: the live-key unique index rejects a key held by a live job; an
-- unexpired TTL window (reserved by an earlier enqueue of the key) rejects it
-- whatever that job's state. An insert with a TTL (re)reserves the window.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), win AS (
    SELECT 1 FROM azync_idempotency_keys k, clock c
    WHERE $11 <> '' AND k.source = $3 AND k.kind = $4 AND k.key = $11 AND k.expires_at > c.t
), ins AS (
    INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                            max_attempts_explicit, idempotency_key, snooze_budget,
                            enqueued_at, updated_at, task_queue, priority, limit_key)
    SELECT $2, $3, $4,
           CASE WHEN coalesce($7::timestamptz, c.t + $8::interval) > c.t
                THEN 'scheduled' ELSE 'pending' END,
           $5, $6::jsonb, coalesce($7::timestamptz, c.t + $8::interval), $9, $10, $11,
           CASE WHEN $13::interval > interval '0' THEN $13::interval END,
           c.t, c.t, $15::text, $16::int,
           coalesce($17::text, CASE WHEN EXISTS (
               SELECT 1 FROM azync_limit_scopes s
               WHERE (s.source = $3 AND s.kind = $4)
                  OR ($3 = 'queue' AND s.source = 'task_queue' AND s.kind = $15::text))
           THEN '' END)
    FROM clock c
    WHERE NOT EXISTS (SELECT 1 FROM win)
    ON CONFLICT (source, kind, idempotency_key)
        WHERE idempotency_key <> ''
          AND state IN ('pending', 'scheduled', 'active', 'paused', 'blocked', 'waiting', 'uncertain')
        DO NOTHING
    RETURNING state, enqueued_at
), reserve AS (
    INSERT INTO azync_idempotency_keys (source, kind, key, expires_at)
    SELECT $3, $4, $11, enqueued_at + $14::interval FROM ins
    WHERE $11 <> '' AND $14::interval > interval '0'
    ON CONFLICT (source, kind, key) DO UPDATE SET expires_at = EXCLUDED.expires_at
), stat AS (
    SELECT azync_job_count(enqueued_at, ARRAY[ROW($3, $4, 1, 0, 0, 0)::azync_job_delta])
    FROM ins
), wake AS (
    SELECT pg_notify($12, $3 || ':' || $4) FROM ins WHERE state = 'pending'
)
SELECT (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM wake) AS woken
WHERE (SELECT count(*) FROM stat) >= 0

-- name: job_enqueue_many
-- Many job_enqueue in one statement, arrays indexed alike: $2 ids uuid[],
-- $3 source, $4 kinds text[], $5 payloads bytea[], $6 metas text[] (JSON),
-- $7 run_ats timestamptz[], $8 delays interval[], $9 max_attempts int[],
-- $10 max_attempts_explicit boolean[], $11 idempotency keys text[],
-- $12 channel, $13 snooze budgets interval[], $14 idempotency ttls interval[],
-- $15 task queues text[], $16 priorities int[], $17 limit keys text[] (as job_enqueue).
-- No two items may share a non-empty (kind, key): the caller drops the later
-- ones (they meet the first one's job, or what deduplicated it). Returns the
-- ids inserted. One stats write for the batch, one wake per due kind.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), item AS (
    -- a keyed item under an unexpired TTL window is dropped (one index probe each)
    SELECT u.*, coalesce(u.run_at, c.t + u.delay) AS due, c.t
    FROM unnest($2::uuid[], $4::text[], $5::bytea[], $6::text[], $7::timestamptz[],
                $8::interval[], $9::int[], $10::boolean[], $11::text[], $13::interval[],
                $14::interval[], $15::text[], $16::int[], $17::text[])
         AS u(id, kind, payload, meta, run_at, delay, max_attempts, explicit, key,
              snooze_budget, ttl, task_queue, priority, limit_key),
         clock c
    WHERE u.key = '' OR NOT EXISTS (
        SELECT 1 FROM azync_idempotency_keys k
        WHERE k.source = $3 AND k.kind = u.kind AND k.key = u.key AND k.expires_at > c.t)
), ins AS (
    INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                            max_attempts_explicit, idempotency_key, snooze_budget,
                            enqueued_at, updated_at, task_queue, priority, limit_key)
    SELECT i.id, $3, i.kind, CASE WHEN i.due > i.t THEN 'scheduled' ELSE 'pending' END,
           i.payload, i.meta::jsonb, i.due, i.max_attempts, i.explicit, i.key,
           CASE WHEN i.snooze_budget > interval '0' THEN i.snooze_budget END, i.t, i.t,
           i.task_queue, i.priority,
           coalesce(i.limit_key, CASE WHEN EXISTS (
               SELECT 1 FROM azync_limit_scopes s
               WHERE (s.source = $3 AND s.kind = i.kind)
                  OR ($3 = 'queue' AND s.source = 'task_queue' AND s.kind = i.task_queue))
               THEN '' END)
    FROM item i
    ON CONFLICT (source, kind, idempotency_key)
        WHERE idempotency_key <> ''
          AND state IN ('pending', 'scheduled', 'active', 'paused', 'blocked', 'waiting', 'uncertain')
        DO NOTHING
    RETURNING id, kind, state, idempotency_key, enqueued_at
), reserve AS (
    INSERT INTO azync_idempotency_keys (source, kind, key, expires_at)
    SELECT $3, n.kind, n.idempotency_key, n.enqueued_at + i.ttl
    FROM ins n JOIN item i ON i.id = n.id
    WHERE n.idempotency_key <> '' AND i.ttl > interval '0'
    ON CONFLICT (source, kind, key) DO UPDATE SET expires_at = EXCLUDED.expires_at
), stat AS (
    SELECT azync_job_count(min(g.at), array_agg(ROW($3, g.kind, g.n, 0, 0, 0)::azync_job_delta))
    FROM (SELECT kind, count(*) AS n, min(enqueued_at) AS at FROM ins GROUP BY kind) g
), wake AS (
    SELECT pg_notify($12, $3 || ':' || k.kind)
    FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
)
SELECT n.id FROM ins n
WHERE (SELECT count(*) FROM stat) >= 0 AND (SELECT count(*) FROM wake) >= 0

-- name: job_dequeue
-- $2 source, $3 kind, $4 limit, $5 lease, $6 default_max_attempts, $7 override_default,
-- $8 task queues text[] the caller serves, $9 channel (a limited job's release
-- wakes its kind there). Each queue is one range of
-- azync_jobs_ready in lease order (azync_due_order: run_at moved earlier by
-- the priority in minutes, migration 0027); the first of them are leased.
-- The budget is resolved on the job's FIRST lease only (started_at IS NULL),
-- so a snooze or release that hands the attempt back never re-resolves it.
-- A kind with limits (azync_limit_scopes, migration 0028) is leased only by
-- azync_job_lease_limited, which takes the limits' slots; so are the queue
-- jobs and activities on the task queues with limits (migration 0031), first:
-- they lease at most their capacity, and the plain queues take what is left
-- of $4 (a deep plain backlog never starves a limited queue). For every other
-- kind and queue that branch is two probes of the scopes' primary key and is
-- never run.
-- The statement is the body of azync_job_lease (migration 0044), whose
-- statements plan once per connection.
SELECT * FROM azync_job_lease(coalesce($1::timestamptz, now()), $2::text, $3::text, $4::int,
                             $5::interval, $6::int, $7::boolean, $8::text[], $9::text)

-- name: job_ack
-- $2 id, $3 lease_token
SELECT 1 FROM azync_job_settle(coalesce($1::timestamptz, now()), ARRAY[$2::uuid],
                               ARRAY[$3::uuid], 'succeeded', NULL, NULL, true)

-- name: job_ack_many
-- $2 ids uuid[], $3 lease_tokens uuid[]; returns the ids acked
SELECT id FROM azync_job_settle(coalesce($1::timestamptz, now()), $2::uuid[], $3::uuid[],
                                'succeeded', NULL, NULL, true)

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
SELECT 1 FROM azync_job_settle(coalesce($1::timestamptz, now()), ARRAY[$2::uuid],
                               ARRAY[$3::uuid], 'dead', $4::text, NULL, true)

-- name: job_release
-- $2 id, $3 lease_token
UPDATE azync_jobs
SET state = 'pending', attempt = greatest(attempt - 1, 0), lease_until = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND lease_token = $3 AND state = 'active'
RETURNING 1

-- name: job_release_blocked
-- $2 id, $3 lease_token, $4 reason, $5 delay: job_release keeping why the worker
-- left it; with a delay over zero the job is scheduled that much later instead.
UPDATE azync_jobs
SET state = CASE WHEN $5::interval > interval '0' THEN 'scheduled' ELSE 'pending' END,
    run_at = CASE WHEN $5::interval > interval '0'
                  THEN coalesce($1::timestamptz, now()) + $5::interval ELSE run_at END,
    attempt = greatest(attempt - 1, 0), lease_until = NULL,
    blocked_reason = $4, updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND lease_token = $3 AND state = 'active'
RETURNING 1

-- name: job_extend_lease
-- $2 id, $3 lease_token, $4 lease
UPDATE azync_jobs
SET lease_until = coalesce($1::timestamptz, now()) + $4::interval,
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND lease_token = $3 AND state = 'active'
RETURNING lease_until

-- name: job_skip
-- $2 id, $3 lease_token, $4 reason. Terminal; counted as processed.
SELECT 1 FROM azync_job_settle(coalesce($1::timestamptz, now()), ARRAY[$2::uuid],
                               ARRAY[$3::uuid], 'skipped', $4::text, NULL, true)

-- name: job_snooze
-- $2 id, $3 lease_token, $4 delay, $5 deadline_error. Returns the new state:
-- 'scheduled' (parked, attempt given back, first snooze stamps deadline_at
-- from snooze_budget) or 'dead' (settled past the stamped deadline; the
-- attempt is recorded with the deadline error).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), j AS (
    UPDATE azync_jobs j
    SET state = CASE WHEN j.deadline_at IS NOT NULL AND c.t > j.deadline_at
                     THEN 'dead' ELSE 'scheduled' END,
        attempt = CASE WHEN j.deadline_at IS NOT NULL AND c.t > j.deadline_at
                       THEN j.attempt ELSE greatest(j.attempt - 1, 0) END,
        run_at = CASE WHEN j.deadline_at IS NOT NULL AND c.t > j.deadline_at
                      THEN j.run_at ELSE c.t + $4::interval END,
        deadline_at = CASE WHEN j.deadline_at IS NULL AND j.snooze_budget > interval '0'
                           THEN c.t + j.snooze_budget ELSE j.deadline_at END,
        last_error = CASE WHEN j.deadline_at IS NOT NULL AND c.t > j.deadline_at
                          THEN $5 ELSE j.last_error END,
        failed_at = CASE WHEN j.deadline_at IS NOT NULL AND c.t > j.deadline_at
                         THEN c.t ELSE j.failed_at END,
        lease_until = NULL, updated_at = c.t
    FROM clock c
    WHERE j.id = $2 AND j.lease_token = $3 AND j.state = 'active'
    RETURNING j.id, j.attempt, j.source, j.kind, j.state, c.t AS t
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, $5, t FROM j WHERE state = 'dead'
), stat AS (
    SELECT azync_job_count(t, ARRAY[ROW(source, kind, 0, 0, 1, 0)::azync_job_delta])
    FROM j WHERE state = 'dead'
)
SELECT state FROM j WHERE (SELECT count(*) FROM stat) >= 0

-- name: job_promote_due
-- $2 source, $3 kinds text[] (NULL = every kind), $4 channel. DAG sleep tasks
-- are completed by the DAG scheduler, never promoted to pending here, and a
-- paused DAG's tasks stay scheduled (a task leased when the DAG was paused
-- may settle scheduled; RetryDAG releases it).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), due AS (
    SELECT id FROM azync_jobs, clock
    WHERE state = 'scheduled' AND run_at <= clock.t AND source = $2
      AND ($3::text[] IS NULL OR kind = ANY ($3::text[]))
      AND NOT (source = 'dag' AND kind = '$sleep')
      AND NOT (source = 'dag' AND EXISTS (
          SELECT 1 FROM azync_dags d WHERE d.id = azync_jobs.dag_id AND d.state = 'paused'))
    FOR UPDATE SKIP LOCKED
), up AS (
    UPDATE azync_jobs j SET state = 'pending', updated_at = c.t
    FROM due, clock c
    WHERE j.id = due.id
    RETURNING j.kind
), wake AS (
    SELECT pg_notify($4, $2 || ':' || kind) FROM (SELECT DISTINCT kind FROM up) k
)
SELECT (SELECT count(*) FROM up) AS promoted, (SELECT count(*) FROM wake) AS woken

-- name: job_reap_expired
-- $2 source, $3 kinds text[] (NULL = every kind), $4 max_reaps (<= 0: never
-- kill), $5 channel. An expired lease returns to pending with reap_count + 1
-- and its attempt given back (a stuck worker does not burn the retry budget),
-- or goes dead recording the attempt once reap_count reaches max_reaps.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), expired AS (
    SELECT id FROM azync_jobs, clock
    WHERE state = 'active' AND lease_until < clock.t AND source = $2
      AND ($3::text[] IS NULL OR kind = ANY ($3::text[]))
    FOR UPDATE SKIP LOCKED
), up AS (
    UPDATE azync_jobs j
    SET reap_count = j.reap_count + 1,
        state = CASE WHEN $4::int > 0 AND j.reap_count + 1 >= $4::int
                     THEN 'dead' ELSE 'pending' END,
        attempt = CASE WHEN $4::int > 0 AND j.reap_count + 1 >= $4::int
                       THEN j.attempt ELSE greatest(j.attempt - 1, 0) END,
        last_error = CASE WHEN $4::int > 0 AND j.reap_count + 1 >= $4::int
                          THEN 'lease expired ' || (j.reap_count + 1)::text
                               || ' times (max reaps ' || $4::int::text || ')'
                          ELSE j.last_error END,
        failed_at = CASE WHEN $4::int > 0 AND j.reap_count + 1 >= $4::int
                         THEN c.t ELSE j.failed_at END,
        lease_until = NULL, updated_at = c.t
    FROM expired, clock c
    WHERE j.id = expired.id
    RETURNING j.id, j.attempt, j.source, j.kind, j.state, j.last_error, c.t AS t
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, last_error, t FROM up WHERE state = 'dead'
), stat AS (
    SELECT azync_job_count(min(t), array_agg(ROW(
               source, kind, 0, 0, (state = 'dead')::int, 1)::azync_job_delta))
    FROM up
), wake AS (
    SELECT pg_notify($5, $2 || ':' || kind)
    FROM (SELECT DISTINCT kind FROM up WHERE state = 'pending') k
)
SELECT (SELECT count(*) FROM up) AS reaped,
       (SELECT count(*) FROM up WHERE state = 'dead') AS killed,
       (SELECT count(*) FROM wake) AS woken
WHERE (SELECT count(*) FROM stat) >= 0

-- name: job_attempts
-- $2 source, $3 id: the job's failure history, oldest first.
SELECT a.attempt, a.error, a.at
FROM azync_job_attempts a JOIN azync_jobs j ON j.id = a.job_id
WHERE j.id = $3 AND j.source = $2 AND ($1::timestamptz IS NULL OR true)
ORDER BY a.id

-- name: job_pending_partitions
-- The (source, kind) partitions holding due pending jobs: the wakes a
-- reconnecting listener replays for notifications it may have missed.
SELECT DISTINCT source, kind FROM azync_jobs
WHERE state = 'pending' AND run_at <= coalesce($1::timestamptz, now())

-- name: limit_declare
-- $2 source, $3 kind, $4 names text[], $5 types text[], $6 capacities int[],
-- $7 periods interval[] (NULL for concurrency), $8 per_key boolean[].
-- Upserts the definitions (the last declaration wins), makes them the kind's
-- only limits, and gives the kind's live jobs that carry no limit key the
-- empty key so the limited lease sees them. Returns the limits now on the kind.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), def AS (
    INSERT INTO azync_limits AS l (name, type, capacity, period, per_key, updated_at)
    SELECT u.name, u.type, u.capacity, u.period, u.per_key, c.t
    FROM unnest($4::text[], $5::text[], $6::int[], $7::interval[], $8::boolean[])
         AS u(name, type, capacity, period, per_key), clock c
    ON CONFLICT (name) DO UPDATE SET
        type = EXCLUDED.type, capacity = EXCLUDED.capacity, period = EXCLUDED.period,
        per_key = EXCLUDED.per_key, updated_at = EXCLUDED.updated_at
    WHERE (l.type, l.capacity, l.period, l.per_key)
          IS DISTINCT FROM (EXCLUDED.type, EXCLUDED.capacity, EXCLUDED.period, EXCLUDED.per_key)
    RETURNING l.name
), gone AS (
    DELETE FROM azync_limit_scopes s
    WHERE s.source = $2 AND s.kind = $3 AND NOT (s.limit_name = ANY ($4::text[]))
    RETURNING s.limit_name
), scope AS (
    INSERT INTO azync_limit_scopes (source, kind, limit_name)
    SELECT $2, $3, u.name FROM unnest($4::text[]) AS u(name)
    ON CONFLICT DO NOTHING
    RETURNING limit_name
), keyed AS (
    UPDATE azync_jobs j SET limit_key = ''
    WHERE cardinality($4::text[]) > 0 AND j.source = $2 AND j.kind = $3
      AND j.limit_key IS NULL AND j.state IN ('pending', 'scheduled', 'paused')
    RETURNING 1
)
SELECT (SELECT count(*) FROM def) AS defined, (SELECT count(*) FROM gone) AS dropped,
       (SELECT count(*) FROM scope) AS scoped, (SELECT count(*) FROM keyed) AS keyed

-- name: limit_declare_task_queue
-- $2 task queue, $3 name (NULL: no limit), $4 type, $5 capacity, $6 period.
-- Upserts the definition (the last declaration wins), makes it the task
-- queue's only limit (scope source 'task_queue', migration 0031), and gives
-- the queue's live queue jobs and activities that carry no limit key the empty
-- key so the limited lease sees them.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), def AS (
    INSERT INTO azync_limits AS l (name, type, capacity, period, per_key, updated_at)
    SELECT $3::text, $4::text, $5::int, $6::interval, false, c.t
    FROM clock c WHERE $3::text IS NOT NULL
    ON CONFLICT (name) DO UPDATE SET
        type = EXCLUDED.type, capacity = EXCLUDED.capacity, period = EXCLUDED.period,
        per_key = EXCLUDED.per_key, updated_at = EXCLUDED.updated_at
    WHERE (l.type, l.capacity, l.period, l.per_key)
          IS DISTINCT FROM (EXCLUDED.type, EXCLUDED.capacity, EXCLUDED.period, EXCLUDED.per_key)
    RETURNING l.name
), gone AS (
    DELETE FROM azync_limit_scopes s
    WHERE s.source = 'task_queue' AND s.kind = $2
      AND s.limit_name IS DISTINCT FROM $3::text
    RETURNING s.limit_name
), scope AS (
    INSERT INTO azync_limit_scopes (source, kind, limit_name)
    SELECT 'task_queue', $2, $3::text WHERE $3::text IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING limit_name
), keyed AS (
    UPDATE azync_jobs j SET limit_key = ''
    WHERE $3::text IS NOT NULL AND j.task_queue = $2
      AND (j.source = 'queue' OR (j.source = 'workflow' AND j.kind LIKE '$op:%'))
      AND j.limit_key IS NULL AND j.state IN ('pending', 'scheduled', 'paused')
    RETURNING 1
)
SELECT (SELECT count(*) FROM def) AS defined, (SELECT count(*) FROM gone) AS dropped,
       (SELECT count(*) FROM scope) AS scoped, (SELECT count(*) FROM keyed) AS keyed

-- name: limit_list
-- Every limit with the kinds and task queues it applies to, its in-flight
-- count (concurrency: slots held; rate: starts within the last period) and
-- the due pending jobs of its kinds and task queues waiting to be leased.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
)
SELECT l.name, l.type, l.capacity, l.period, l.per_key, l.updated_at,
       coalesce((SELECT array_agg(s.source || ':' || s.kind ORDER BY s.source, s.kind)
                 FROM azync_limit_scopes s
                 WHERE s.limit_name = l.name AND s.source <> 'task_queue'), '{}') AS kinds,
       coalesce((SELECT array_agg(s.kind ORDER BY s.kind)
                 FROM azync_limit_scopes s
                 WHERE s.limit_name = l.name AND s.source = 'task_queue'), '{}') AS task_queues,
       (SELECT count(*) FROM azync_limit_slots sl
        WHERE sl.limit_name = l.name
          AND CASE WHEN l.type = 'concurrency'
                   THEN sl.holder IS NOT NULL AND (sl.held_until IS NULL OR sl.held_until > c.t)
                   ELSE sl.used_at >= c.t - l.period END) AS in_flight,
       (SELECT count(DISTINCT sl.key) FROM azync_limit_slots sl
        WHERE sl.limit_name = l.name AND sl.slot = 1) AS keys,
       (SELECT count(*) FROM azync_limit_scopes s
        JOIN azync_jobs j ON j.state = 'pending' AND j.source = s.source AND j.kind = s.kind
                         AND j.limit_key IS NOT NULL AND j.run_at <= c.t
        WHERE s.limit_name = l.name AND s.source <> 'task_queue')
       + (SELECT count(*) FROM azync_limit_scopes s
          JOIN azync_jobs j ON j.state = 'pending' AND j.task_queue = s.kind
                           AND j.limit_key IS NOT NULL AND j.run_at <= c.t
          WHERE s.limit_name = l.name AND s.source = 'task_queue'
            AND NOT EXISTS (SELECT 1 FROM azync_limit_scopes k
                            WHERE k.limit_name = l.name AND k.source = j.source
                              AND k.kind = j.kind)) AS waiting
FROM azync_limits l, clock c
ORDER BY l.name

-- name: limit_slots_vacuum
-- $2 idle_for: delete the slots of keys with no held slot and no admission
-- for $2. All of a key's slots or none: each is locked (SKIP LOCKED: an
-- admission holding one keeps the key) and re-checked free, and the key
-- goes only when every one of its slots was locked, since an admission
-- re-creates a key's slots only when its last slot is missing.
-- Returns the slot rows deleted.
WITH idle AS (
    SELECT s.limit_name, s.key, count(*) AS n
    FROM azync_limit_slots s
    GROUP BY s.limit_name, s.key
    HAVING bool_and(s.holder IS NULL OR s.held_until <= coalesce($1::timestamptz, now()))
       AND coalesce(max(s.used_at), '-infinity') < coalesce($1::timestamptz, now()) - $2::interval
), locked AS (
    SELECT s.limit_name, s.key
    FROM azync_limit_slots s JOIN idle i ON i.limit_name = s.limit_name AND i.key = s.key
    WHERE (s.holder IS NULL OR s.held_until <= coalesce($1::timestamptz, now()))
      AND coalesce(s.used_at, '-infinity') < coalesce($1::timestamptz, now()) - $2::interval
    FOR UPDATE OF s SKIP LOCKED
), whole AS (
    SELECT l.limit_name, l.key FROM locked l JOIN idle i USING (limit_name, key)
    GROUP BY l.limit_name, l.key, i.n
    HAVING count(*) = i.n
), gone AS (
    DELETE FROM azync_limit_slots s USING whole w
    WHERE s.limit_name = w.limit_name AND s.key = w.key
    RETURNING 1
)
SELECT count(*) FROM gone

-- name: limit_release_stopped
-- $2 job id, $3 lease token: free the slots a stopped attempt still holds
-- (azync_limit_release_stopped, migration 0042); returns the slots freed.
SELECT azync_limit_release_stopped(coalesce($1::timestamptz, now()), $2::uuid, $3::uuid)
