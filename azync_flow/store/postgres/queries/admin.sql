-- Queue admin surface and vacuum verbs. $1 is always the clock override.
-- Every verb is scoped to one source ($2). Live states of the idempotency key:
-- pending, scheduled, active, paused, blocked, waiting, uncertain.
-- Jobs owned by a workflow execution (run_id) or a DAG run (dag_id) are out of
-- reach of retry, archive and delete: their run decides their fate. A dead
-- operation of a workflow is not a dead letter: the workflow saw its failure.

-- name: current_time
-- The store's current time (the clock override, else the backend clock).
SELECT coalesce($1::timestamptz, now())

-- name: job_list_kinds
-- $2 source: kinds of live or retained jobs and of stat history (folded or
-- not), sorted.
SELECT kind FROM azync_jobs WHERE source = $2 AND ($1::timestamptz IS NULL OR true)
UNION
SELECT kind FROM azync_job_stats WHERE source = $2
UNION
SELECT kind FROM azync_job_stat_deltas WHERE source = $2
ORDER BY kind

-- name: job_kind_depths
-- $2 source, $3 kind ('' = every kind): instantaneous counters per kind.
SELECT kind,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'scheduled') AS scheduled,
       count(*) FILTER (WHERE state = 'active') AS active,
       count(*) FILTER (WHERE state = 'dead'
                        AND (run_id IS NULL OR task_key = '$wft')) AS dead,
       count(*) FILTER (WHERE state = 'paused') AS paused,
       count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
       greatest(interval '0', coalesce(coalesce($1::timestamptz, now())
                - min(run_at) FILTER (WHERE state = 'pending'), interval '0'))
           AS oldest_pending_age
FROM azync_jobs
WHERE source = $2 AND ($3 = '' OR kind = $3)
GROUP BY kind

-- name: job_backlog
-- Every source: per (source, kind) the jobs due and waiting (pending, run_at
-- passed) and the operations waiting for a decision (uncertain), with the age
-- of the oldest. Reads the partial indexes of pending and uncertain rows only.
WITH clock AS (SELECT coalesce($1::timestamptz, now()) AS now)
SELECT j.source, j.kind, 'pending' AS state, count(*) AS count,
       greatest(interval '0', min(c.now) - min(j.run_at)) AS oldest_age
FROM azync_jobs j CROSS JOIN clock c
WHERE j.state = 'pending' AND j.run_at <= c.now
GROUP BY j.source, j.kind
UNION ALL
SELECT j.source, j.kind, 'uncertain', count(*),
       greatest(interval '0', min(c.now) - min(coalesce(j.uncertain_since, j.updated_at)))
FROM azync_jobs j CROSS JOIN clock c
WHERE j.state = 'uncertain'
GROUP BY j.source, j.kind

-- name: stats_daily
-- $2 source, $3 kind ('' = every kind), $4 days: the daily window ending today
-- (UTC), oldest first, days without activity as zeros. Folded counts plus the
-- deltas not yet folded, read in one snapshot (a fold moves rows between the
-- two tables in one transaction), so the sums are exact.
WITH days AS (
    SELECT d::date AS day
    FROM generate_series((coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date - ($4::int - 1),
                         (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date,
                         interval '1 day') AS d
), sums AS (
    SELECT day, sum(enqueued) AS enqueued, sum(processed) AS processed,
           sum(failed) AS failed, sum(reaped) AS reaped
    FROM (
        SELECT kind, day, enqueued, processed, failed, reaped
        FROM azync_job_stats WHERE source = $2
        UNION ALL
        SELECT kind, day, enqueued, processed, failed, reaped
        FROM azync_job_stat_deltas WHERE source = $2
    ) c
    WHERE ($3 = '' OR kind = $3)
      AND day >= (coalesce($1::timestamptz, now()) AT TIME ZONE 'UTC')::date - ($4::int - 1)
    GROUP BY day
)
SELECT days.day, coalesce(s.enqueued, 0)::bigint AS enqueued,
       coalesce(s.processed, 0)::bigint AS processed, coalesce(s.failed, 0)::bigint AS failed,
       coalesce(s.reaped, 0)::bigint AS reaped
FROM days LEFT JOIN sums s ON s.day = days.day
ORDER BY days.day

-- name: job_list
-- $2 source, $3 kind ('' = all), $4 state ('' = all), $5 offset, $6 limit.
-- One row per job of the page, each carrying the total; a single row with a
-- NULL id when the page is empty. Ordering per the contract (ListJobs).
WITH m AS (
    SELECT * FROM azync_jobs
    WHERE source = $2 AND ($3 = '' OR kind = $3) AND ($4 = '' OR state = $4)
      AND ($4 <> 'dead' OR run_id IS NULL OR task_key = '$wft')
      AND ($1::timestamptz IS NULL OR true)
), total AS (
    SELECT count(*) AS total FROM m
)
SELECT total.total, p.*
FROM total LEFT JOIN LATERAL (
    SELECT * FROM m
    ORDER BY
        CASE WHEN $4 IN ('pending', 'dead') THEN m.enqueued_at END ASC,
        CASE WHEN $4 IN ('scheduled', 'paused') THEN m.run_at END ASC,
        CASE WHEN $4 = 'active' THEN m.lease_until END ASC,
        CASE WHEN $4 = 'succeeded' THEN m.completed_at END DESC,
        CASE WHEN $4 = '' THEN m.enqueued_at END DESC,
        CASE WHEN $4 NOT IN ('', 'pending', 'dead', 'scheduled', 'paused', 'active', 'succeeded')
             THEN m.enqueued_at END ASC,
        m.id
    OFFSET $5 LIMIT $6
) p ON true

-- name: job_get
-- $2 source, $3 id. limit_waits: the full limits a pending job of a limited
-- kind or task queue waits for (azync_job_limit_waits, migrations 0028, 0031).
SELECT j.*, CASE WHEN j.state = 'pending' AND j.limit_key IS NOT NULL
                 THEN azync_job_limit_waits(j.source, j.kind, j.limit_key,
                                            coalesce($1::timestamptz, now()),
                                            j.task_queue) END AS limit_waits
FROM azync_jobs j WHERE j.source = $2 AND j.id = $3

-- name: job_retry
-- $2 source, $3 id, $4 channel. Dead -> pending with a fresh budget: attempt,
-- reap_count and the stamped snooze deadline cleared.
WITH up AS (
    UPDATE azync_jobs
    SET state = 'pending', attempt = 0, reap_count = 0, deadline_at = NULL,
        run_at = coalesce($1::timestamptz, now()), lease_until = NULL,
        updated_at = coalesce($1::timestamptz, now())
    WHERE source = $2 AND id = $3 AND state = 'dead'
      AND dag_id IS NULL AND run_id IS NULL
    RETURNING kind
), wake AS (
    SELECT pg_notify($4, $2 || ':' || kind) FROM up
)
SELECT (SELECT count(*) FROM wake) AS woken FROM up

-- name: job_retry_all_dead
-- $2 source, $3 kind ('' = all), $4 channel. A dead job whose idempotency key
-- is now held by a live job stays dead (reviving it would break the live-key
-- guarantee); of several dead jobs sharing a key only the oldest is revived.
WITH cand AS (
    SELECT j.id, j.kind, j.idempotency_key FROM azync_jobs j
    WHERE j.source = $2 AND j.state = 'dead' AND ($3 = '' OR j.kind = $3)
      AND j.dag_id IS NULL AND j.run_id IS NULL
      AND (j.idempotency_key = '' OR NOT EXISTS (
            SELECT 1 FROM azync_jobs l
            WHERE l.source = j.source AND l.kind = j.kind
              AND l.idempotency_key = j.idempotency_key
              AND l.state IN ('pending', 'scheduled', 'active', 'paused', 'blocked',
                              'waiting', 'uncertain')))
    FOR UPDATE SKIP LOCKED
), pick AS (
    SELECT id FROM cand WHERE idempotency_key = ''
    UNION ALL
    (SELECT DISTINCT ON (kind, idempotency_key) id FROM cand
     WHERE idempotency_key <> '' ORDER BY kind, idempotency_key, id)
), up AS (
    UPDATE azync_jobs j
    SET state = 'pending', attempt = 0, reap_count = 0, deadline_at = NULL,
        run_at = coalesce($1::timestamptz, now()), lease_until = NULL,
        updated_at = coalesce($1::timestamptz, now())
    FROM pick WHERE j.id = pick.id
    RETURNING j.kind
), wake AS (
    SELECT pg_notify($4, $2 || ':' || kind) FROM (SELECT DISTINCT kind FROM up) k
)
SELECT (SELECT count(*) FROM up) AS retried, (SELECT count(*) FROM wake) AS woken

-- name: job_run_now
-- $2 source, $3 id, $4 channel. Scheduled only.
WITH up AS (
    UPDATE azync_jobs
    SET state = 'pending', run_at = coalesce($1::timestamptz, now()),
        updated_at = coalesce($1::timestamptz, now())
    WHERE source = $2 AND id = $3 AND state = 'scheduled'
    RETURNING kind
), wake AS (
    SELECT pg_notify($4, $2 || ':' || kind) FROM up
)
SELECT (SELECT count(*) FROM wake) AS woken FROM up

-- name: job_archive
-- $2 source, $3 id: pending or scheduled -> dead.
UPDATE azync_jobs
SET state = 'dead', failed_at = coalesce($1::timestamptz, now()),
    updated_at = coalesce($1::timestamptz, now())
WHERE source = $2 AND id = $3 AND state IN ('pending', 'scheduled')
  AND dag_id IS NULL AND run_id IS NULL
RETURNING 1

-- name: job_pause
-- $2 source, $3 id: pending or scheduled -> paused.
UPDATE azync_jobs SET state = 'paused', updated_at = coalesce($1::timestamptz, now())
WHERE source = $2 AND id = $3 AND state IN ('pending', 'scheduled')
RETURNING 1

-- name: job_resume
-- $2 source, $3 id, $4 channel: paused -> pending or scheduled per run_at.
WITH up AS (
    UPDATE azync_jobs
    SET state = CASE WHEN run_at > coalesce($1::timestamptz, now())
                     THEN 'scheduled' ELSE 'pending' END,
        updated_at = coalesce($1::timestamptz, now())
    WHERE source = $2 AND id = $3 AND state = 'paused'
    RETURNING kind, state
), wake AS (
    SELECT pg_notify($4, $2 || ':' || kind) FROM up WHERE state = 'pending'
)
SELECT state, (SELECT count(*) FROM wake) AS woken FROM up

-- name: job_delete
-- $2 source, $3 id, $4 state
DELETE FROM azync_jobs
WHERE source = $2 AND id = $3 AND state = $4 AND dag_id IS NULL AND run_id IS NULL
  AND ($1::timestamptz IS NULL OR true)
RETURNING 1

-- name: job_delete_all
-- $2 source, $3 kind ('' = all), $4 state (never active/uncertain: refused by
-- the caller). DAG- and workflow-owned jobs are exempt: their run owns them.
WITH d AS (
    DELETE FROM azync_jobs
    WHERE source = $2 AND ($3 = '' OR kind = $3) AND state = $4
      AND dag_id IS NULL AND run_id IS NULL
      AND ($1::timestamptz IS NULL OR true)
    RETURNING 1
)
SELECT count(*) FROM d

-- name: job_vacuum_dead
-- $2 source, $3 kind ('' = all), $4 older_than. DAG- and workflow-owned jobs
-- are exempt: their lifecycle belongs to their run.
WITH d AS (
    DELETE FROM azync_jobs
    WHERE source = $2 AND ($3 = '' OR kind = $3) AND state = 'dead'
      AND enqueued_at < coalesce($1::timestamptz, now()) - $4::interval
      AND dag_id IS NULL AND run_id IS NULL
    RETURNING 1
)
SELECT count(*) FROM d

-- name: job_nuke_all
-- $2 source: every job (any state, owned or not), counter row (folded or
-- delta) and idempotency key of the source, in one statement. The ledger
-- (azync_events, azync_subscribers) has no source column and is not touched.
WITH j AS (
    DELETE FROM azync_jobs WHERE source = $2 AND ($1::timestamptz IS NULL OR true) RETURNING 1
), s AS (
    DELETE FROM azync_job_stats WHERE source = $2 RETURNING 1
), sd AS (
    DELETE FROM azync_job_stat_deltas WHERE source = $2 RETURNING 1
), k AS (
    DELETE FROM azync_idempotency_keys WHERE source = $2 RETURNING 1
)
SELECT (SELECT count(*) FROM j) AS jobs,
       (SELECT count(*) FROM s) + (SELECT count(*) FROM sd) AS stats,
       (SELECT count(*) FROM k) AS keys

-- name: stats_vacuum
-- $2 source, $3 retention (> 0): stat days older than the retention, folded
-- rows and deltas alike. Returns the rows deleted.
WITH cut AS (
    SELECT ((coalesce($1::timestamptz, now()) - $3::interval) AT TIME ZONE 'UTC')::date AS day
), d AS (
    DELETE FROM azync_job_stats s USING cut WHERE s.source = $2 AND s.day < cut.day RETURNING 1
), dd AS (
    DELETE FROM azync_job_stat_deltas s USING cut WHERE s.source = $2 AND s.day < cut.day
    RETURNING 1
)
SELECT (SELECT count(*) FROM d) + (SELECT count(*) FROM dd)

-- name: stats_fold
-- $2 batch size: move up to $2 counter delta rows (any source) into
-- azync_job_stats, in this one statement (one transaction): the rows are
-- locked (SKIP LOCKED: a racing fold takes other rows), deleted, and their
-- RETURNING sums added to the daily rows in (source, kind, day) order. A
-- delta is counted by the one fold whose DELETE removed it, so two folds
-- racing never count a delta twice nor lose one (the second waits only to add
-- to a daily row the first wrote, until the first commits). O(rows folded).
-- Returns the rows folded.
WITH picked AS (
    DELETE FROM azync_job_stat_deltas
    WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM azync_job_stat_deltas
        WHERE $1::timestamptz IS NULL OR true
        LIMIT $2
        FOR UPDATE SKIP LOCKED))
    RETURNING source, kind, day, enqueued, processed, failed, reaped
), up AS (
    INSERT INTO azync_job_stats AS s (source, kind, day, enqueued, processed, failed, reaped)
    SELECT source, kind, day, sum(enqueued), sum(processed), sum(failed), sum(reaped)
    FROM picked
    GROUP BY source, kind, day
    ORDER BY source, kind, day
    ON CONFLICT (source, kind, day) DO UPDATE
        SET enqueued = s.enqueued + EXCLUDED.enqueued,
            processed = s.processed + EXCLUDED.processed,
            failed = s.failed + EXCLUDED.failed,
            reaped = s.reaped + EXCLUDED.reaped
    RETURNING 1
)
SELECT count(*) FROM picked

-- name: idempotency_vacuum
-- $2 source: expired time-window keys.
WITH d AS (
    DELETE FROM azync_idempotency_keys
    WHERE source = $2 AND expires_at <= coalesce($1::timestamptz, now())
    RETURNING 1
)
SELECT count(*) FROM d

-- name: job_vacuum_completed
-- $2 source, $3 retention (> 0), $4 batch size. Succeeded (and skipped) jobs
-- completed before retention ago, oldest first, one bounded batch per call.
-- DAG-owned and workflow-owned jobs are exempt (removed with their run).
WITH victims AS (
    SELECT id FROM azync_jobs
    WHERE source = $2 AND state IN ('succeeded', 'skipped')
      AND completed_at < coalesce($1::timestamptz, now()) - $3::interval
      AND dag_id IS NULL AND run_id IS NULL
    ORDER BY completed_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), d AS (
    DELETE FROM azync_jobs j USING victims WHERE j.id = victims.id RETURNING 1
)
SELECT count(*) FROM d

-- name: next_due_at
-- The earliest moment after the clock at which something becomes due in this
-- schema: a scheduled or future pending job of any source (retry backoffs,
-- snoozes, delayed jobs, future workflow tasks, DAG sleep tasks), an unfired
-- workflow timer or the next fire of an unpaused schedule. NULL when nothing
-- is waiting on time. Leases are not counted.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
)
SELECT least(
    (SELECT min(run_at) FROM azync_jobs, clock
     WHERE state IN ('scheduled', 'pending') AND run_at > clock.t),
    (SELECT min(fire_at) FROM azync_workflow_timers, clock
     WHERE fired_at IS NULL AND fire_at > clock.t),
    (SELECT min(next_fire_at) FROM azync_schedules, clock
     WHERE NOT paused AND next_fire_at > clock.t)
)

-- Change hints (ChangeNotifier): a cheap "did anything change" probe.

-- name: change_counters
-- $2 schema. Rows inserted, updated or deleted so far in the tables whose
-- changes admin surfaces track (cumulative statistics; a backend publishes
-- its counts within about a second of commit, at most ~10 s when idle).
SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint AS changes
FROM pg_stat_user_tables
WHERE schemaname = $2
  AND relname IN ('azync_jobs', 'azync_dags', 'azync_events', 'azync_workflow_executions')
  AND ($1::timestamptz IS NULL OR true)

-- name: store_search_path_set
-- $2 a search_path for the rest of the transaction (LOCAL): a transactional
-- step's transaction takes the store's back before its settling statements
-- (reads no table, so it plans the same under any path).
SELECT set_config('search_path', $2::text, true) AS search_path,
       $1::timestamptz IS NULL AS real_clock

-- name: store_default_search_path
-- The search_path a connection gets from the server (role, database and
-- server settings), read on a connection opened without the store's.
SELECT current_setting('search_path') AS search_path, $1::timestamptz IS NULL AS real_clock
