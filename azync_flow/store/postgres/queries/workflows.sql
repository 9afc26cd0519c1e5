-- Workflow-as-code executions, history, signals, timers, workflow tasks and
-- operations. $1 is always the clock override: coalesce($1, now()).
-- Every job here has source='workflow' and run_id = the execution id; a
-- workflow task has task_key '$wft', an operation its execution key.
-- Multi-statement verbs lock the execution row FOR NO KEY UPDATE before
-- creating a runnable workflow task, so the one-runnable-task index never
-- races (FK inserts still proceed: they take only FOR KEY SHARE).

-- name: workflow_existing
-- $2 id, $3 name, $4 business key: the execution a conflicting start hit.
SELECT id, coalesce($1::timestamptz, now()) AS at FROM (
    SELECT id, 0 AS pref FROM azync_workflow_executions WHERE id = $2
    UNION ALL
    SELECT id, 1 FROM azync_workflow_executions
    WHERE name = $3 AND business_idempotency_key = $4 AND $4 <> ''
      AND state IN ('running', 'suspended')
) e
ORDER BY pref
LIMIT 1

-- name: workflow_start_many
-- Start executions, each with its pending first workflow task (ranked as a
-- first pass), in one statement; arrays indexed alike (one item for a single start): $2 ids uuid[],
-- $3 names text[], $4 versions text[], $5 inputs bytea[], $6 business keys
-- text[], $7 task_queues text[], $8 metas text[] (JSON), $9 trace contexts
-- text[] (JSON), $10 channel, $11 priorities int[], $12 execution timeouts
-- and $13 run timeouts interval[] (NULL: none; timeout_at the earlier
-- deadline), $14 search attributes text[] (JSON maps, stored form).
-- Returns the ids inserted; an item conflicting
-- (same id, or same live (name, key)) with an execution, or with an earlier
-- item of the batch, inserts nothing. One stats write; wakes: the wake-ups
-- of the new workflow tasks, for the driver to send after the commit.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), ins AS (
    INSERT INTO azync_workflow_executions (id, name, version, state, business_idempotency_key,
                                           task_queue, input, meta, trace_context, priority,
                                           execution_timeout, run_timeout, timeout_at,
                                           search_attributes, created_at, updated_at)
    SELECT u.id, u.name, u.version, 'running', u.key, u.task_queue, u.input, u.meta::jsonb,
           u.trace_context::jsonb, u.priority, u.execution_timeout, u.run_timeout,
           least(c.t + u.execution_timeout, c.t + u.run_timeout), u.search::jsonb, c.t, c.t
    FROM unnest($2::uuid[], $3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
                $8::text[], $9::text[], $11::int[], $12::interval[], $13::interval[],
                $14::text[])
         WITH ORDINALITY
         AS u(id, name, version, input, key, task_queue, meta, trace_context, priority,
              execution_timeout, run_timeout, search, n),
         clock c
    ORDER BY u.n
    ON CONFLICT DO NOTHING
    RETURNING id, name, task_queue, priority, created_at
), task AS (
    INSERT INTO azync_jobs (id, source, kind, state, run_at, run_id, task_key,
                            enqueued_at, updated_at, first_pass, workflow_name, task_queue,
                            priority)
    SELECT gen_random_uuid(), 'workflow', '$wft', 'pending', created_at, id, '$wft',
           created_at, created_at, true, name, task_queue, priority
    FROM ins
    RETURNING kind, enqueued_at
), stat AS (
    SELECT azync_job_count(min(g.at), array_agg(ROW('workflow', g.kind, g.n, 0, 0, 0)::azync_job_delta))
    FROM (SELECT kind, count(*) AS n, min(enqueued_at) AS at FROM task GROUP BY kind) g
), wake AS (
    -- no NOTIFY in the commit: the driver sends these once it committed
    SELECT string_agg('workflow:' || k.kind, E'\n') AS wakes
    FROM (SELECT DISTINCT kind FROM task) k WHERE $10::text IS NOT NULL
)
SELECT i.id, (SELECT wakes FROM wake) AS wakes FROM ins i
WHERE (SELECT count(*) FROM stat) >= 0

-- name: workflow_existing_many
-- $2 ids uuid[], $3 names text[], $4 business keys text[]: per item (n, its
-- 1-based position) the execution it conflicted with, as workflow_existing
-- finds it (same id first, else the live holder of (name, key)), with that
-- execution's name and input; id NULL when none holds it any more.
SELECT u.n, e.id, e.name, e.input
FROM unnest($2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY AS u(id, name, key, n)
LEFT JOIN LATERAL (
    SELECT x.id, x.name, x.input FROM (
        SELECT w.id, w.name, w.input, 0 AS pref FROM azync_workflow_executions w
        WHERE w.id = u.id
        UNION ALL
        SELECT w.id, w.name, w.input, 1 FROM azync_workflow_executions w
        WHERE w.name = u.name AND w.business_idempotency_key = u.key AND u.key <> ''
          AND w.state IN ('running', 'suspended')
    ) x
    ORDER BY x.pref
    LIMIT 1
) e ON true
WHERE ($1::timestamptz IS NULL OR true)
ORDER BY u.n

-- name: workflow_get
-- $2 id
SELECT *, coalesce($1::timestamptz, now()) AS at FROM azync_workflow_executions WHERE id = $2

-- name: workflow_describe
-- $2 id: the execution row plus its live workflow task's attempt and last
-- error (NULL when it has none): a task that keeps failing says why the run
-- is not progressing; and the due time of its earliest unfired timer (what it
-- waits on, with its awaited_signals); for a running execution, what it waits
-- for from the workers (azync_workflow_waits, migration 0026).
SELECT e.*, coalesce($1::timestamptz, now()) AS at,
       t.attempt - (t.state = 'active')::int AS task_failures, t.last_error AS task_error,
       CASE WHEN e.state = 'running'
            THEN azync_workflow_waits(e.id, coalesce($1::timestamptz, now())) END AS waits,
       (SELECT min(tm.fire_at) FROM azync_workflow_timers tm
        WHERE tm.workflow_id = e.id AND tm.fired_at IS NULL) AS next_timer_at
FROM azync_workflow_executions e
LEFT JOIN LATERAL (
    SELECT j.attempt, j.last_error, j.state FROM azync_jobs j
    WHERE j.run_id = e.id AND j.source = 'workflow' AND j.task_key = '$wft'
      AND j.state IN ('pending', 'scheduled', 'active')
    ORDER BY j.state = 'active' DESC, j.attempt DESC
    LIMIT 1
) t ON true
WHERE e.id = $2

-- name: workflow_lock
-- $2 id. Serialises writers of one execution (see header).
SELECT *, coalesce($1::timestamptz, now()) AS at FROM azync_workflow_executions
WHERE id = $2 FOR NO KEY UPDATE

-- name: workflow_finish
-- $2 id, $3 terminal state, $4 result, $5 failure reason, $6 channel: the one
-- terminal transition (azync_workflow_finish, migration 0004): finish, retire
-- runnable jobs, record unconsumed signals as undelivered, notify waiters.
-- It locks the execution row itself first. No row = missing or not live.
SELECT retired, undelivered, $1::timestamptz AS at
FROM azync_workflow_finish($2, $3, $4, $5, coalesce($1::timestamptz, now()), $6)

-- name: workflow_cancel_uncertain_ops
-- $2 run id: a suspended execution cancelled by the client settles its
-- uncertain operations as cancelled (its code will never decide them).
UPDATE azync_jobs
SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
    last_error = 'cancelled with its suspended workflow execution',
    completed_at = coalesce($1::timestamptz, now()), updated_at = coalesce($1::timestamptz, now())
WHERE run_id = $2 AND source = 'workflow' AND state = 'uncertain'

-- name: workflow_cancel_request
-- $2 id
UPDATE azync_workflow_executions
SET cancel_requested = true, updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND state IN ('running', 'suspended')
RETURNING state

-- name: workflow_suspend
-- $2 id, $3 reason, $4 history seq it concerns (NULL = none), $5 operation
-- job id it concerns (NULL = none)
UPDATE azync_workflow_executions
SET state = 'suspended', suspend_reason = $3, suspend_seq = $4::bigint,
    suspend_operation_id = $5::uuid, updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND state = 'running'
RETURNING id

-- name: workflow_suspend_retarget
-- $2 id, $3 reason, $4 operation job id: a suspended execution whose
-- operation was decided while another still waits now names that one (the
-- history seq of its OperationUncertain event is not known here: NULL).
UPDATE azync_workflow_executions
SET suspend_reason = $3, suspend_seq = NULL, suspend_operation_id = $4::uuid,
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND state = 'suspended' AND suspend_operation_id IS NOT NULL
RETURNING id

-- name: workflow_suspend_drop_task
-- $2 run id: an operator's suspend removes the waiting workflow task, so no
-- pass runs while suspended (resume schedules a fresh one).
DELETE FROM azync_jobs
WHERE run_id = $2 AND source = 'workflow' AND task_key = '$wft'
  AND state IN ('pending', 'scheduled') AND ($1::timestamptz IS NULL OR true)
RETURNING id

-- name: workflow_active_task
-- $2 run id: the workflow task a worker runs now, if any.
SELECT id, $1::timestamptz AS at FROM azync_jobs
WHERE run_id = $2 AND source = 'workflow' AND task_key = '$wft' AND state = 'active'

-- name: workflow_resume
-- $2 id
UPDATE azync_workflow_executions
SET state = 'running', suspend_reason = '', suspend_seq = NULL, suspend_operation_id = NULL,
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND state = 'suspended'
RETURNING id

-- name: workflow_uncertain_ops
-- $2 run id: operations of the execution still waiting for a decision.
SELECT id, kind, task_key, uncertain_reason, $1::timestamptz AS at FROM azync_jobs
WHERE run_id = $2 AND source = 'workflow' AND state = 'uncertain'
ORDER BY uncertain_since, id

-- name: workflow_task_schedule
-- $2 run id, $3 kind, $4 run_at (NULL = now), $5 channel. Inserts the one
-- runnable workflow task, or moves an existing one to least(run_at, new)
-- (azync_schedule_workflow_task, migration 0011).
SELECT id, state, kind, inserted, (state = 'pending')::int::bigint AS woken
FROM azync_schedule_workflow_task($2::uuid, $3::text, $4::timestamptz,
                                  coalesce($1::timestamptz, now()), $5::text)

-- name: workflow_job_runnable_task
-- $2 run id: is another runnable workflow task waiting?
SELECT id, $1::timestamptz AS at FROM azync_jobs
WHERE run_id = $2 AND source = 'workflow' AND task_key = '$wft'
  AND state IN ('pending', 'scheduled')

-- name: workflow_history_append
-- $2 workflow id, $3 type, $4 payload: one event at next_seq.
WITH e AS (
    UPDATE azync_workflow_executions
    SET next_seq = next_seq + 1, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2
    RETURNING id, next_seq - 1 AS seq
)
INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
SELECT id, seq, $3, $4, coalesce($1::timestamptz, now()) FROM e
RETURNING seq

-- name: workflow_history_list
-- $2 workflow id, $3 after seq, $4 limit (NULL = all)
SELECT workflow_id, seq, type, payload, created_at, $1::timestamptz AS at
FROM azync_workflow_history
WHERE workflow_id = $2 AND seq > $3
ORDER BY seq
LIMIT $4

-- name: workflow_signal_duplicate
-- $2 workflow id, $3 name, $4 message id
SELECT id, $1::timestamptz AS at FROM azync_workflow_signals
WHERE workflow_id = $2 AND name = $3 AND message_id = $4 AND $4 <> ''

-- name: workflow_signal_insert
-- $2 workflow id, $3 name, $4 message id, $5 payload
INSERT INTO azync_workflow_signals (workflow_id, name, message_id, payload, created_at)
VALUES ($2, $3, $4, $5, coalesce($1::timestamptz, now()))
ON CONFLICT DO NOTHING
RETURNING id

-- name: workflow_signals_buffered
-- $2 workflow id
SELECT id, name, message_id, payload, $1::timestamptz AS at FROM azync_workflow_signals
WHERE workflow_id = $2 AND consumed_seq IS NULL
ORDER BY id

-- name: workflow_timers_due
-- $2 workflow id
SELECT seq FROM azync_workflow_timers
WHERE workflow_id = $2 AND fired_at IS NULL AND fire_at <= coalesce($1::timestamptz, now())
ORDER BY fire_at, seq

-- name: workflow_clock
SELECT coalesce($1::timestamptz, now())

-- name: workflow_op_schedule
-- $2 run id, $3 kind, $4 payload, $5 meta (json), $6 execution key, $7 run_at
-- (NULL = now), $8 max_attempts (0 = resolved at lease), $9 route (json), $10
-- channel. Run with the execution row locked (workflow_lock), so this
-- statement's snapshot sees any operation a pass or another call committed
-- first: the one insert of operations (azync_workflow_ops_insert, deduplicated
-- by execution key among the run's live operations), then the id of the live
-- operation of that key, inserted or not.
WITH ins AS (
    SELECT i.id FROM azync_workflow_ops_insert(
        coalesce($1::timestamptz, now()), $10, $2, ARRAY[$3::text], ARRAY[$4::bytea],
        ARRAY[$5::text], ARRAY[$6::text], ARRAY[$7::timestamptz], ARRAY[$8::int],
        ARRAY[$9::text], NULL, NULL, 0) i
)
SELECT coalesce(
           (SELECT id FROM ins),
           (SELECT j.id FROM azync_jobs j
            WHERE j.run_id = $2 AND j.source = 'workflow' AND j.task_key = $6
              AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
            ORDER BY j.enqueued_at, j.id LIMIT 1)) AS id,
       EXISTS (SELECT 1 FROM ins) AS inserted

-- name: workflow_op_mark_uncertain
-- $2 id, $3 lease_token, $4 reason. Fenced; the lease token is kept so a late
-- report of the same attempt stays identifiable until a decision clears it.
WITH j AS (
    UPDATE azync_jobs
    SET state = 'uncertain', uncertain_reason = $4,
        uncertain_since = coalesce($1::timestamptz, now()), last_error = $4,
        failed_at = coalesce($1::timestamptz, now()), lease_until = NULL,
        updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND lease_token = $3 AND state = 'active' AND source = 'workflow'
      AND task_key <> '$wft'
    RETURNING id, run_id, kind, task_key, attempt
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, 'uncertain: ' || $4, coalesce($1::timestamptz, now()) FROM j
)
SELECT * FROM j

-- name: workflow_op_expired_nonidempotent
-- $2 limit: operations whose lease expired and that must not run twice.
SELECT id FROM azync_jobs
WHERE state = 'active' AND source = 'workflow' AND task_key <> '$wft'
  AND meta ->> 'idempotent' = 'false'
  AND lease_until < coalesce($1::timestamptz, now())
ORDER BY lease_until, id
LIMIT $2

-- name: workflow_op_lock_expired
-- $2 id: lock one still-expired non-idempotent operation (reaper).
SELECT * FROM azync_jobs
WHERE id = $2 AND state = 'active' AND source = 'workflow'
  AND meta ->> 'idempotent' = 'false'
  AND lease_until < coalesce($1::timestamptz, now())
FOR UPDATE SKIP LOCKED

-- name: workflow_op_lock
-- $2 id: lock an operation row whatever its state (resolve).
SELECT *, $1::timestamptz AS at FROM azync_jobs
WHERE id = $2 AND source = 'workflow' AND task_key <> '$wft'
FOR UPDATE

-- name: workflow_op_resolve
-- $2 id, $3 new state, $4 decision, $5 decided_by, $6 note, $7 result,
-- $8 last_error. Only an uncertain operation; clears the lease token so a
-- late report of the old attempt is fenced out.
WITH j AS (
    UPDATE azync_jobs
    SET state = $3, decision = $4, decision_by = $5, decision_note = $6,
        decided_at = coalesce($1::timestamptz, now()),
        result = CASE WHEN $3 = 'succeeded' THEN $7 ELSE result END,
        last_error = CASE WHEN $3 = 'dead' THEN $8 ELSE last_error END,
        completed_at = CASE WHEN $3 = 'pending' THEN completed_at
                            ELSE coalesce($1::timestamptz, now()) END,
        run_at = CASE WHEN $3 = 'pending' THEN coalesce($1::timestamptz, now()) ELSE run_at END,
        lease_token = NULL, lease_until = NULL,
        updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND state = 'uncertain'
    RETURNING id, run_id, kind, attempt
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, 'resolved ' || $4 || ' by ' || $5, coalesce($1::timestamptz, now())
    FROM j
)
SELECT * FROM j

-- name: workflow_op_lock_decided
-- $2 run id, $3 execution key, $4 result: lock the operation whose complete
-- decision recorded exactly this result (no row once it was decided anew).
SELECT *, $1::timestamptz AS at FROM azync_jobs
WHERE run_id = $2 AND task_key = $3 AND source = 'workflow' AND task_key <> '$wft'
  AND state = 'succeeded' AND decision = 'complete' AND result = $4
FOR UPDATE

-- name: workflow_op_repark_decided
-- $2 id, $3 reason, $4 payload: park a decided operation as uncertain again
-- (its decided result does not fit its result type); $4 records the result
-- type the next decision is checked against.
WITH j AS (
    UPDATE azync_jobs
    SET state = 'uncertain', uncertain_reason = $3,
        uncertain_since = coalesce($1::timestamptz, now()), last_error = $3,
        failed_at = coalesce($1::timestamptz, now()), payload = $4,
        updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND state = 'succeeded'
    RETURNING id, run_id, kind, task_key, attempt
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, 'uncertain: ' || $3, coalesce($1::timestamptz, now()) FROM j
)
SELECT * FROM j

-- name: workflow_op_attempt_settlement
-- $2 id, $3 lease_token: state and last error of an operation that still
-- carries this attempt's token and is no longer active (a settle, reschedule
-- or park under that token); no row otherwise.
SELECT state, last_error, $1::timestamptz AS at FROM azync_jobs
WHERE id = $2 AND lease_token = $3 AND state <> 'active' AND source = 'workflow'
  AND task_key <> '$wft'

-- name: workflow_op_list_uncertain
-- $2 limit, $3 workflow id (NULL = all)
SELECT j.id, j.run_id, e.name AS workflow_name, j.kind, j.task_key, j.payload, j.meta,
       j.attempt, j.uncertain_since, j.uncertain_reason, $1::timestamptz AS at
FROM azync_jobs j
JOIN azync_workflow_executions e ON e.id = j.run_id
WHERE j.state = 'uncertain' AND j.source = 'workflow'
  AND ($3::uuid IS NULL OR j.run_id = $3)
ORDER BY j.uncertain_since, j.id
LIMIT $2

-- name: workflow_vacuum
-- $2 retention: terminal executions completed before now - retention; FKs
-- cascade to history, signals, timers and jobs (and their attempts).
WITH d AS (
    DELETE FROM azync_workflow_executions
    WHERE state IN ('succeeded', 'failed', 'cancelled', 'terminated')
      AND completed_at < coalesce($1::timestamptz, now()) - $2::interval
    RETURNING 1
)
SELECT count(*) FROM d

-- name: workflow_stalled_scan
-- $2 older_than, $3 cursor progress_at and $4 cursor id (NULL = from the
-- oldest), $5 batch. One batch of the stalled-execution scan: running
-- executions updated at least $2 ago with nothing pending — no live workflow
-- job (task or operation), no unfired timer, no live child of the current run
-- (its outcome will wake it), and not blocked on a signal unless a signal it
-- waits for is already buffered (its task is lost). Examines the next $5
-- candidates in (progress_at, id) order after the cursor among the whole
-- progress bins older than the cutoff (an index range, not every parked
-- execution: each of their rows is old enough, so the cursor passes none too
-- young), plus, beside the cursor, the old-enough rows of the cutoff's own bin
-- and the executions holding a buffered signal (few: a pass consumes them),
-- and returns every stalled one of them, oldest first. Every row carries the
-- batch's size and its last (progress_at, id), the next cursor; one row with a
-- NULL id when none is stalled.
WITH cut AS (
    SELECT coalesce($1::timestamptz, now()) - $2::interval AS at,
           date_bin(interval '10 seconds', coalesce($1::timestamptz, now()) - $2::interval,
                    timestamptz '2000-01-01 00:00:00+00') AS bin  -- progress_at's bins
), scan AS (
    SELECT e.id, e.name, e.updated_at, e.progress_at, e.run_id, e.awaited_signals
    FROM azync_workflow_executions e, cut
    WHERE e.state = 'running'
      AND e.progress_at < cut.bin
      AND (e.progress_at, e.id) > (coalesce($3::timestamptz, '-infinity'),
                                   coalesce($4::uuid, '00000000-0000-0000-0000-000000000000'))
    ORDER BY e.progress_at, e.id
    LIMIT $5::int
), cand AS (
    SELECT id, name, updated_at, run_id, awaited_signals FROM scan
    UNION ALL
    SELECT e.id, e.name, e.updated_at, e.run_id, e.awaited_signals
    FROM azync_workflow_executions e, cut
    WHERE e.state = 'running' AND e.progress_at = cut.bin AND e.updated_at <= cut.at
    UNION ALL
    SELECT e.id, e.name, e.updated_at, e.run_id, e.awaited_signals
    FROM azync_workflow_executions e, cut
    WHERE e.state = 'running'
      AND e.updated_at <= cut.at
      AND e.progress_at <> cut.bin
      AND e.id IN (SELECT s.workflow_id FROM azync_workflow_signals s
                   WHERE s.consumed_seq IS NULL)
      AND e.id NOT IN (SELECT id FROM scan)
), stalled AS MATERIALIZED (
    -- tested in the select list, so each test is an index probe per candidate,
    -- never a join against every job or timer (a waiting run is ruled out first)
    SELECT e.id, e.name, e.updated_at,
           (cardinality(e.awaited_signals) = 0 OR EXISTS (
                SELECT 1 FROM azync_workflow_signals s
                WHERE s.workflow_id = e.id AND s.consumed_seq IS NULL
                  AND s.name = ANY (e.awaited_signals)))
           AND NOT EXISTS (
                SELECT 1 FROM azync_jobs j
                WHERE j.run_id = e.id AND j.source = 'workflow'
                  AND j.state IN ('pending', 'scheduled', 'active', 'uncertain'))
           AND NOT EXISTS (
                SELECT 1 FROM azync_workflow_timers t
                WHERE t.workflow_id = e.id AND t.fired_at IS NULL)
           AND NOT EXISTS (
                SELECT 1 FROM azync_workflow_executions c
                WHERE c.parent_id = e.id AND c.parent_run_id = coalesce(e.run_id, e.id)
                  AND c.state IN ('running', 'suspended')) AS stalled
    FROM cand e
), last AS (
    SELECT progress_at, id FROM scan ORDER BY progress_at DESC, id DESC LIMIT 1
)
SELECT s.id, s.name, s.updated_at, (SELECT count(*) FROM scan) AS scanned,
       l.progress_at AS cursor_at, l.id AS cursor_id
FROM (SELECT 1) one
LEFT JOIN last l ON true
LEFT JOIN stalled s ON s.stalled
ORDER BY s.updated_at, s.id

-- name: workflow_wake
-- $2 channel, $3 "source:kind"
SELECT pg_notify($2, $3), $1::timestamptz AS at

-- name: workflow_unserved
-- The (task queue, workflow name) pairs of due (pending) workflow tasks that
-- no live worker serves: a skip scan of azync_jobs_workflow_task_due (one
-- index probe per distinct pair), then the small worker registry.
WITH RECURSIVE pairs AS (
    (SELECT j.task_queue, j.workflow_name FROM azync_jobs j
     WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'pending'
       AND j.workflow_name IS NOT NULL
     ORDER BY j.task_queue, j.workflow_name
     LIMIT 1)
    UNION ALL
    SELECT n.task_queue, n.workflow_name FROM pairs p
    CROSS JOIN LATERAL (
        SELECT j.task_queue, j.workflow_name FROM azync_jobs j
        WHERE j.source = 'workflow' AND j.task_key = '$wft'
          AND j.state = 'pending' AND j.workflow_name IS NOT NULL
          AND (j.task_queue, j.workflow_name) > (p.task_queue, p.workflow_name)
        ORDER BY j.task_queue, j.workflow_name
        LIMIT 1
    ) n
)
SELECT p.task_queue, p.workflow_name FROM pairs p
WHERE NOT EXISTS (
    SELECT 1 FROM azync_workers w
    WHERE w.expires_at > coalesce($1::timestamptz, now())
      AND w.workflows @> ARRAY[p.workflow_name] AND w.task_queues @> ARRAY[p.task_queue])
ORDER BY p.task_queue, p.workflow_name

-- name: workflow_promote_due
-- $2 kinds text[] (NULL = every workflow kind): due scheduled workflow jobs
-- (operation retries after backoff, future workflow tasks) become pending.
WITH p AS (
    UPDATE azync_jobs
    SET state = 'pending', updated_at = coalesce($1::timestamptz, now())
    WHERE state = 'scheduled' AND source = 'workflow'
      AND run_at <= coalesce($1::timestamptz, now())
      AND ($2::text[] IS NULL OR kind = ANY($2::text[]))
    RETURNING kind
), wake AS (
    SELECT pg_notify($3, 'workflow:' || k.kind) FROM (SELECT DISTINCT kind FROM p) k
)
SELECT (SELECT count(*) FROM p) AS promoted, (SELECT count(*) FROM wake) AS woken

-- name: workflow_op_lock_uncertain_attempt
-- $2 id, $3 lease_token: an uncertain operation still carrying the token of
-- the attempt that turned uncertain (no decision has cleared it yet).
SELECT *, $1::timestamptz AS at FROM azync_jobs
WHERE id = $2 AND lease_token = $3 AND state = 'uncertain' AND source = 'workflow'
FOR UPDATE

-- name: workflow_expired
-- $2 true = workflow tasks, false = idempotent operations; $3 limit.
-- Active workflow jobs whose lease expired (non-idempotent operations are
-- left to workflow_op_expired_nonidempotent: they turn uncertain).
SELECT id FROM azync_jobs
WHERE state = 'active' AND source = 'workflow'
  AND lease_until < coalesce($1::timestamptz, now())
  AND CASE WHEN $2::boolean THEN task_key = '$wft'
           ELSE task_key <> '$wft' AND coalesce(meta ->> 'idempotent', '') <> 'false' END
ORDER BY lease_until, id
LIMIT $3

-- name: workflow_lock_expired
-- $2 id: lock one still-expired active workflow job (reaper).
SELECT *, $1::timestamptz AS at FROM azync_jobs
WHERE id = $2 AND state = 'active' AND source = 'workflow'
  AND lease_until < coalesce($1::timestamptz, now())
FOR UPDATE SKIP LOCKED

-- name: workflow_job_reap
-- $2 id, $3 retry delay (NULL or <= 0: run again now): back to pending, or
-- scheduled after the delay, with reap_count + 1 (the attempt is kept, so
-- the next lease is attempt + 1). A workflow task with a runnable sibling is
-- merged into it by the trigger of migration 0002.
UPDATE azync_jobs
SET state = CASE WHEN $3::interval > interval '0' THEN 'scheduled' ELSE 'pending' END,
    reap_count = reap_count + 1, lease_until = NULL,
    run_at = coalesce($1::timestamptz, now()) + greatest(coalesce($3::interval, interval '0'), interval '0'),
    updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND state = 'active'
RETURNING state

-- name: workflow_job_lost
-- $2 job id, $3 attempt, $4 kind, $5 error (NULL: the attempt row is written
-- elsewhere, e.g. by a dead-letter): a lease the reaper reclaimed, in its
-- transaction: the lost attempt in the job's failure history and one reaped
-- count (a delta row insert, no shared row).
WITH a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT $2, $3, $5, coalesce($1::timestamptz, now())
    WHERE $5::text IS NOT NULL
    RETURNING 1
)
SELECT azync_job_count(coalesce($1::timestamptz, now()),
                       ARRAY[ROW('workflow', $4, 0, 0, 0, 1)::azync_job_delta]) AS counted,
       (SELECT count(*) FROM a) AS recorded

-- name: workflow_job_ack
-- $2 id, $3 lease_token. Like job_ack without the stats upsert: workflow
-- transactions count into one sorted workflow_stats_bump at their end.
SELECT kind FROM azync_job_settle(coalesce($1::timestamptz, now()), ARRAY[$2::uuid],
                                  ARRAY[$3::uuid], 'succeeded', NULL, NULL, false)

-- name: workflow_job_dead
-- $2 id, $3 lease_token, $4 last_error. Like job_dead without the stats upsert.
SELECT kind FROM azync_job_settle(coalesce($1::timestamptz, now()), ARRAY[$2::uuid],
                                  ARRAY[$3::uuid], 'dead', $4::text, NULL, false)

-- name: workflow_stats_bump
-- $2 kinds text[] (sorted, distinct), $3 enqueued, $4 processed, $5 failed
-- bigint[]. The ONLY counter write of a multi-statement workflow transaction,
-- its last statement: one delta row per kind (azync_job_count inserts, so no
-- transaction waits on another's counters).
SELECT azync_job_count(coalesce($1::timestamptz, now()), array_agg(ROW(
           'workflow', u.kind, u.enq, u.proc, u.failed, 0)::azync_job_delta))
FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(kind, enq, proc, failed)

-- name: workflow_list
-- $2 name (NULL = any), $3 state (NULL = any), $4 limit, $5 before created_at,
-- $6 before id (keyset cursor; NULL = from the newest). Newest first, with the
-- live workflow task's failures and last error and what it waits for as in
-- workflow_describe: index probes per running row of the page (after the
-- LIMIT), none for others.
SELECT e.*, t.attempt - (t.state = 'active')::int AS task_failures, t.last_error AS task_error,
       CASE WHEN e.state = 'running'
            THEN azync_workflow_waits(e.id, coalesce($1::timestamptz, now())) END AS waits
FROM (
    SELECT * FROM azync_workflow_executions
    WHERE ($2::text IS NULL OR name = $2)
      AND ($3::text IS NULL OR state = $3)
      AND ($5::timestamptz IS NULL OR (created_at, id) < ($5::timestamptz, $6::uuid))
      AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
    ORDER BY created_at DESC, id DESC
    LIMIT $4
) e
LEFT JOIN LATERAL (
    SELECT j.attempt, j.last_error, j.state FROM azync_jobs j
    WHERE e.state = 'running'
      AND j.run_id = e.id AND j.source = 'workflow' AND j.task_key = '$wft'
      AND j.state IN ('pending', 'scheduled', 'active')
    ORDER BY j.state = 'active' DESC, j.attempt DESC
    LIMIT 1
) t ON true
ORDER BY e.created_at DESC, e.id DESC

-- name: workflow_list_search
-- As workflow_list, $7 a jsonpath predicate over the search attributes (built
-- by the driver from typed filters; never NULL): only executions it matches.
-- The GIN index (jsonb_path_ops, migration 0030) serves its equality parts.
SELECT e.*, t.attempt - (t.state = 'active')::int AS task_failures, t.last_error AS task_error,
       CASE WHEN e.state = 'running'
            THEN azync_workflow_waits(e.id, coalesce($1::timestamptz, now())) END AS waits
FROM (
    SELECT * FROM azync_workflow_executions
    WHERE search_attributes @@ $7::jsonpath
      AND ($2::text IS NULL OR name = $2)
      AND ($3::text IS NULL OR state = $3)
      AND ($5::timestamptz IS NULL OR (created_at, id) < ($5::timestamptz, $6::uuid))
    ORDER BY created_at DESC, id DESC
    LIMIT $4
) e
LEFT JOIN LATERAL (
    SELECT j.attempt, j.last_error, j.state FROM azync_jobs j
    WHERE e.state = 'running'
      AND j.run_id = e.id AND j.source = 'workflow' AND j.task_key = '$wft'
      AND j.state IN ('pending', 'scheduled', 'active')
    ORDER BY j.state = 'active' DESC, j.attempt DESC
    LIMIT 1
) t ON true
ORDER BY e.created_at DESC, e.id DESC

-- name: workflow_task_load
-- $2 workflow id, $3 after seq: everything a replay pass reads, in ONE
-- statement (one snapshot): the execution row, its history past $3 and
-- buffered signals as parallel arrays (in order), due timer seqs, and the
-- clock. No row when the execution does not exist.
SELECT e.*, coalesce($1::timestamptz, now()) AS load_now,
       h.h_seq, h.h_type, h.h_payload, h.h_created,
       s.s_id, s.s_name, s.s_message_id, s.s_payload,
       ARRAY(SELECT t.seq FROM azync_workflow_timers t
             WHERE t.workflow_id = e.id AND t.fired_at IS NULL
               AND t.fire_at <= coalesce($1::timestamptz, now())
             ORDER BY t.fire_at, t.seq) AS due_timer_seqs
FROM azync_workflow_executions e
CROSS JOIN LATERAL (
    SELECT array_agg(x.seq ORDER BY x.seq) AS h_seq, array_agg(x.type ORDER BY x.seq) AS h_type,
           array_agg(x.payload ORDER BY x.seq) AS h_payload,
           array_agg(x.created_at ORDER BY x.seq) AS h_created
    FROM azync_workflow_history x
    WHERE x.workflow_id = e.id AND x.seq > $3
) h
CROSS JOIN LATERAL (
    SELECT array_agg(g.id ORDER BY g.id) AS s_id, array_agg(g.name ORDER BY g.id) AS s_name,
           array_agg(g.message_id ORDER BY g.id) AS s_message_id,
           array_agg(g.payload ORDER BY g.id) AS s_payload
    FROM azync_workflow_signals g
    WHERE g.workflow_id = e.id AND g.consumed_seq IS NULL
) s
WHERE e.id = $2

-- name: workflow_fence
-- $2 job id, $3 lease_token: the fence of a runtime settle in one statement —
-- locks the active workflow job (FOR UPDATE) and THEN its execution row
-- (FOR NO KEY UPDATE; the lateral forces that order). No row = stale token.
SELECT j.id, j.kind, j.task_key, j.run_id, x.state, x.next_seq,
       coalesce($1::timestamptz, now()) AS at
FROM (
    SELECT id, kind, task_key, run_id FROM azync_jobs
    WHERE id = $2 AND lease_token = $3 AND state = 'active' AND source = 'workflow'
    FOR UPDATE
) j
CROSS JOIN LATERAL (
    SELECT state, next_seq FROM azync_workflow_executions
    WHERE id = j.run_id AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
    FOR NO KEY UPDATE
) x

-- name: workflow_pass_write_ack
-- $2 workflow id, $3 first seq, $4 types text[], $5 payloads bytea[], $6 job
-- id to ack (NULL = none), $7 its lease_token, $8 awaited signal names text[]
-- (NULL = unchanged): workflow_pass_write plus the ack of the (already fenced
-- and locked) job, one statement. acked_kind is NULL when nothing was acked.
WITH ev AS (
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    SELECT $2, $3 + u.ord - 1, u.type, u.payload, coalesce($1::timestamptz, now())
    FROM unnest($4::text[], $5::bytea[]) WITH ORDINALITY AS u(type, payload, ord)
    RETURNING seq
), ack AS (
    UPDATE azync_jobs
    SET state = 'succeeded', completed_at = coalesce($1::timestamptz, now()),
        lease_until = NULL, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $6 AND lease_token = $7 AND state = 'active'
    RETURNING kind
)
UPDATE azync_workflow_executions
SET next_seq = $3 + cardinality($4::text[]), updated_at = coalesce($1::timestamptz, now()),
    awaited_signals = coalesce($8::text[], awaited_signals)
WHERE id = $2
RETURNING next_seq, (SELECT count(*) FROM ev) AS written, (SELECT kind FROM ack) AS acked_kind

-- name: workflow_task_schedule_stats
-- $2 run id, $3 kind, $4 run_at, $5 channel, $6 timers_only: false =
-- workflow_task_schedule ($4 NULL = now), true = workflow_task_schedule_next
-- (at least($4, earliest unfired timer); nothing when both are NULL).
-- $7 kinds text[], $8 enqueued, $9 processed, $10 failed bigint[]: the
-- transaction's pending stats deltas. Schedules the task, THEN records the
-- deltas plus its own enqueue as the transaction's one counter write, grouped
-- by kind (see workflow_stats_bump).
-- $11 signals_wake: with $6, also now when an unconsumed signal is buffered
-- (a pass that no workflow task carried may not have seen it).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), want AS (
    SELECT CASE WHEN $6::boolean
                THEN least($4::timestamptz,
                           (SELECT min(fire_at) FROM azync_workflow_timers
                            WHERE workflow_id = $2 AND fired_at IS NULL),
                           CASE WHEN $11::boolean AND EXISTS (
                               SELECT 1 FROM azync_workflow_signals
                               WHERE workflow_id = $2 AND consumed_seq IS NULL)
                           THEN c.t END)
                ELSE coalesce($4::timestamptz, c.t) END AS at
    FROM clock c
), up AS (
    SELECT s.* FROM clock c, want w,
         LATERAL azync_schedule_workflow_task($2, $3, w.at, c.t, $5) s
    WHERE w.at IS NOT NULL
), delta AS (
    SELECT u.kind, u.enq, u.proc, u.failed
    FROM unnest($7::text[], $8::bigint[], $9::bigint[], $10::bigint[])
         AS u(kind, enq, proc, failed)
    UNION ALL
    SELECT kind, 1, 0, 0 FROM up WHERE inserted
), stat AS (
    SELECT azync_job_count(c.t, array_agg(ROW(
               'workflow', x.kind, x.enq, x.proc, x.failed, 0)::azync_job_delta)) AS n
    FROM delta x, clock c
    GROUP BY c.t
)
SELECT (SELECT count(*) FROM up) AS scheduled,
       (SELECT count(*) FROM up WHERE state = 'pending') AS woken,
       coalesce((SELECT n FROM stat), 0) AS stats_rows

-- name: workflow_op_complete
-- $2 job id, $3 lease_token, $4 run id, $5 event type, $6 payload, $7 channel.
-- complete_operation (ack path) as ONE statement = one implicit transaction:
-- fence (lock the active operation under the token, THEN its execution —
-- the lateral forces the order), ack it, append ($5, $6) at next_seq when
-- the execution is live, schedule a workflow task when running, and LAST
-- the counter deltas (grouped by kind, after every other write: delta reads
-- every write CTE). No row = stale token: nothing written.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), f AS (
    SELECT j.id, j.kind, j.task_key, j.run_id, x.state, x.next_seq
    FROM (
        SELECT id, kind, task_key, run_id FROM azync_jobs
        WHERE id = $2 AND lease_token = $3 AND state = 'active' AND source = 'workflow'
          AND task_key <> '$wft' AND run_id = $4
        FOR UPDATE
    ) j
    CROSS JOIN LATERAL (
        SELECT state, next_seq FROM azync_workflow_executions
        WHERE id = j.run_id
        FOR NO KEY UPDATE
    ) x
), ack AS (
    UPDATE azync_jobs a
    SET state = 'succeeded', completed_at = c.t, lease_until = NULL, updated_at = c.t
    FROM f, clock c
    WHERE a.id = f.id AND a.lease_token = $3 AND a.state = 'active'
    RETURNING a.kind
), ev AS (
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    SELECT f.run_id, f.next_seq, $5, $6, c.t
    FROM f, clock c
    WHERE f.state IN ('running', 'suspended')
    RETURNING seq
), ex AS (
    UPDATE azync_workflow_executions e
    SET next_seq = f.next_seq + 1, updated_at = c.t
    FROM f, clock c
    WHERE e.id = f.run_id AND f.state IN ('running', 'suspended')
    RETURNING e.next_seq
), up AS (
    SELECT s.* FROM f, clock c,
         LATERAL azync_schedule_workflow_task(f.run_id, '$wft', c.t, c.t, $7) s
    WHERE f.state = 'running'
), delta AS (
    SELECT d.kind, d.enq, d.proc
    FROM (
        SELECT kind, 0 AS enq, 1 AS proc FROM ack
        UNION ALL
        SELECT kind, 1, 0 FROM up WHERE inserted
    ) d
    WHERE (SELECT count(*) FROM ev) >= 0 AND (SELECT count(*) FROM ex) >= 0
), stat AS (
    SELECT azync_job_count(c.t, array_agg(ROW(
               'workflow', x.kind, x.enq, x.proc, 0, 0)::azync_job_delta)) AS n
    FROM delta x, clock c
    GROUP BY c.t
)
SELECT f.state, (SELECT max(seq) FROM ev) AS seq, (SELECT count(*) FROM ack) AS acked,
       (SELECT count(*) FROM up WHERE state = 'pending') AS woken,
       coalesce((SELECT n FROM stat), 0) AS stats_rows
FROM f

-- name: workflow_start_bare
-- $2 id, $3 name, $4 version, $5 input, $6 business key, $7 task_queue,
-- $8 meta, $9 trace_context, $10 priority, $11 execution timeout, $12 run
-- timeout (NULL: none): insert a running execution WITHOUT
-- a workflow task (its first pass commits in the same transaction). No row on
-- conflict (same id, or same live (name, key)).
INSERT INTO azync_workflow_executions (id, name, version, state, business_idempotency_key,
                                       task_queue, input, meta, trace_context, priority,
                                       execution_timeout, run_timeout, timeout_at,
                                       created_at, updated_at)
VALUES ($2, $3, $4, 'running', $6, $7, $5, $8::jsonb, $9::jsonb, $10::int,
        $11::interval, $12::interval,
        least(coalesce($1::timestamptz, now()) + $11::interval,
              coalesce($1::timestamptz, now()) + $12::interval),
        coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
ON CONFLICT DO NOTHING
RETURNING id, 'running' AS state, 1 AS next_seq, created_at AS at

-- name: workflow_task_lease_load
-- $2 kind, $3 limit, $4 lease, $5 run ids uuid[] and $6 after seqs bigint[]
-- (the caller's cached executions: history is read past that seq, else from
-- the start), $7 first passes too (false: only tasks of executions in
-- flight), $8 task queues text[] and $9 workflow names text[] the caller
-- serves (NULL = any), $10 run ids to leave (uuid[]: executions the caller
-- could not run). The one lease of workflow tasks, with workflow_task_load
-- of every leased task, in ONE statement: the
-- leased job row plus its execution, history, buffered signals, due timers
-- and the clock (the load's snapshot is the lease's). Due pending (or due
-- scheduled) tasks whose execution has no active workflow task (passes never
-- overlap), continuing passes before first passes, each in lease order
-- (azync_due_order: run_at moved earlier by the priority in minutes,
-- migration 0027). Served (queue, name) pairs are each one range of the
-- pending tasks' index in lease order (azync_jobs_workflow_task_due) and one
-- of the scheduled ones' by run_at (azync_jobs_workflow_task_timed, which
-- stops at the first not due), so tasks of names or queues the caller does not
-- serve, or not due yet, are never read; with a NULL side the pairs are those
-- with runnable tasks (a scan: for tools and tests).
-- load_stale: the task row was changed by a transaction that committed after
-- this statement's snapshot and before its FOR UPDATE locked the row (a
-- signal, update, cancel or completion merged its wake into the task): the
-- lease holds the new version, but the load below still reads the snapshot,
-- so it may miss what woke the task; the caller reloads such a task
-- (workflow_task_load, a fresh snapshot) before running its pass. The
-- locked row's xmin is the version FOR UPDATE followed to; the subquery's is
-- the snapshot's (a data-modifying CTE's rows are not visible to the rest of
-- the statement). The statement is the body of azync_workflow_task_lease_load
-- (migration 0043), whose statements plan once per connection; this query
-- expands the job and execution rows it returns. more_due (migration 0049):
-- the lease left a due task it did not take (true whenever the batch is full).
SELECT (l.job).*, coalesce($1::timestamptz, now()) AS load_now, l.load_stale, l.after_seq,
       (l.ex).id AS e_id, (l.ex).name AS e_name,
       (l.ex).version AS e_version, (l.ex).state AS e_state,
       (l.ex).business_idempotency_key AS e_business_idempotency_key, (l.ex).task_queue AS e_task_queue,
       (l.ex).priority AS e_priority, (l.ex).input AS e_input,
       (l.ex).result AS e_result, (l.ex).failure_reason AS e_failure_reason,
       (l.ex).meta AS e_meta, (l.ex).created_at AS e_created_at,
       (l.ex).updated_at AS e_updated_at, (l.ex).completed_at AS e_completed_at,
       (l.ex).next_seq AS e_next_seq, (l.ex).cancel_requested AS e_cancel_requested,
       (l.ex).suspend_reason AS e_suspend_reason, (l.ex).trace_context AS e_trace_context,
       (l.ex).suspend_seq AS e_suspend_seq, (l.ex).suspend_operation_id AS e_suspend_operation_id,
       (l.ex).signals_undelivered AS e_signals_undelivered, (l.ex).run_id AS e_run_id,
       (l.ex).run_no AS e_run_no, (l.ex).parent_id AS e_parent_id,
       l.h_seq, l.h_type, l.h_payload, l.h_created, l.s_id, l.s_name, l.s_message_id,
       l.s_payload, l.due_timer_seqs, l.more_due
FROM azync_workflow_task_lease_load(
    coalesce($1::timestamptz, now()), $2::text, $3::int, $4::interval, $5::uuid[],
    $6::bigint[], $7::boolean, $8::text[], $9::text[], $10::uuid[]) l

-- name: workflow_pass_commit
-- A replay pass committed as ONE statement = one implicit transaction, whatever
-- it writes (azync_workflow_pass_commit, migration 0023, whose header documents
-- each argument and the result row). $2 channel, $3 id, $4 run, $5 job ids
-- uuid[], $6 their lease tokens uuid[], $7 task, $8 dead-letter errors text[];
-- $55 and $56 the routes of its operations and children (migration 0026).
-- wakes: the wake-ups the commit implies, one payload a line, for the driver
-- to send once the statement has committed (migration 0033: the function
-- sends no NOTIFY; the select list is evaluated after the function ran).
SELECT *, current_setting('azync.wakes', true) AS wakes FROM azync_workflow_pass_commit(
    p_at => coalesce($1::timestamptz, now()), p_channel => $2::text, p_id => $3::uuid,
    p_run => $4::uuid, p_jobs => $5::uuid[], p_tokens => $6::uuid[], p_task => $7::boolean,
    p_errors => $8::text[], p_expected => $9::bigint, p_types => $10::text[],
    p_payloads => $11::bytea[], p_awaited => $12::text[],
    p_op_kinds => $13::text[], p_op_payloads => $14::bytea[], p_op_metas => $15::text[],
    p_op_keys => $16::text[], p_op_run_ats => $17::timestamptz[],
    p_op_max_attempts => $18::int[], p_op_routes => $55::text[], p_local_keys => $19::text[],
    p_local_lease => $20::interval, p_local_budget => $21::int,
    p_timer_seqs => $22::bigint[], p_timer_delays => $23::interval[], p_fired => $24::bigint[],
    p_signal_ids => $25::bigint[], p_signal_seqs => $26::bigint[],
    p_update_ids => $27::text[], p_update_names => $28::text[],
    p_update_states => $29::text[], p_update_results => $30::bytea[],
    p_update_error_types => $31::text[], p_update_messages => $32::text[],
    p_child_seqs => $33::bigint[], p_child_ids => $34::uuid[], p_child_names => $35::text[],
    p_child_versions => $36::text[], p_child_inputs => $37::bytea[],
    p_child_policies => $38::text[], p_child_carriers => $39::text[],
    p_child_routes => $56::text[],
    p_child_signal_ids => $40::uuid[], p_child_signal_names => $41::text[],
    p_child_signal_payloads => $42::bytea[], p_child_signal_message_ids => $43::text[],
    p_child_cancels => $44::uuid[],
    p_outcome => $45::text, p_result => $46::bytea, p_reason => $47::text,
    p_suspend_seq => $48::bigint, p_new_run => $49::uuid, p_cancel_seen => $50::boolean,
    p_next_at => $51::timestamptz, p_next_now => $52::boolean,
    p_signals_wake => $53::boolean, p_keep_lease => $54::interval)

-- name: workflow_terminate_lock_jobs
-- $2 id: lock every live job of the execution WITHOUT waiting, after its
-- row (workflow_lock). A fenced settle (pass commit, operation completion,
-- reap, resolve) locks its job and then the execution, while signal,
-- schedule and the terminal transition lock the execution first: no single
-- order fits both, so a job held by another transaction fails this lock at
-- once (lock_not_available) and terminate rolls back and retries, instead of
-- deadlocking with that transaction.
SELECT id FROM azync_jobs
WHERE run_id = $2 AND source = 'workflow'
  AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
FOR UPDATE NOWAIT

-- name: workflow_terminate
-- $2 id, $3 history event type, $4 its payload, $5 the cancelled jobs'
-- last_error. ONLY after workflow_lock in the same transaction (this
-- statement's snapshot then sees every job of the execution), and followed
-- by workflow_finish (state 'terminated', undelivered signals, waiters). The
-- terminal event is appended at next_seq; the live jobs are cancelled with
-- their lease token cleared (a worker holding the workflow task or an
-- operation loses the fence: its commit or completion writes nothing); the
-- unfired timers are marked fired (never delivered).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), ex AS (
    UPDATE azync_workflow_executions e
    SET next_seq = e.next_seq + 1, updated_at = c.t
    FROM clock c
    WHERE e.id = $2 AND e.state IN ('running', 'suspended')
    RETURNING e.id, e.next_seq - 1 AS seq, e.name, e.trace_context
), ev AS (
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    SELECT x.id, x.seq, $3, $4, c.t FROM ex x, clock c
    RETURNING seq
), jobs AS (
    UPDATE azync_jobs j
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL, last_error = $5,
        completed_at = c.t, updated_at = c.t
    FROM ex x, clock c
    WHERE j.run_id = x.id AND j.source = 'workflow'
      AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
    RETURNING j.kind, j.task_key
), tmr AS (
    UPDATE azync_workflow_timers tm
    SET fired_at = c.t
    FROM ex x, clock c
    WHERE tm.workflow_id = x.id AND tm.fired_at IS NULL
    RETURNING tm.seq
)
SELECT x.seq, x.name, x.trace_context, (SELECT count(*) FROM ev) AS written,
       ARRAY(SELECT o.task_key || ' ' || o.kind FROM jobs o WHERE o.task_key <> '$wft'
             ORDER BY o.task_key) AS operations,
       (SELECT count(*) FROM jobs WHERE task_key = '$wft') AS tasks,
       ARRAY(SELECT seq FROM tmr ORDER BY seq) AS timers
FROM ex x

-- Child executions and continue-as-new (migration 0009). $1 is the clock
-- override, as everywhere.

-- name: workflow_runs
-- $2 id: the earlier runs of an execution (continue-as-new, reset), oldest first.
SELECT run_no, run_id, input, started_at, ended_at, events, ended_as, reset_seq, reset_reason,
       state_at_reset, $1::timestamptz AS at
FROM azync_workflow_runs
WHERE workflow_id = $2
ORDER BY run_no

-- name: workflow_run_history
-- $2 id, $3 run number: the history of an earlier run.
SELECT workflow_id, seq, type, payload, created_at, $1::timestamptz AS at
FROM azync_workflow_run_history
WHERE workflow_id = $2 AND run_no = $3
ORDER BY seq

-- name: workflow_history_size
-- $2 id: events and payload bytes of the current run's history.
SELECT count(*) AS events, coalesce(sum(octet_length(payload)), 0)::bigint AS bytes,
       $1::timestamptz AS at
FROM azync_workflow_history
WHERE workflow_id = $2

-- name: workflow_children
-- $2 parent id: its child executions, oldest first.
SELECT *, $1::timestamptz AS at FROM azync_workflow_executions
WHERE parent_id = $2
ORDER BY created_at, id

-- name: workflow_children_closed
-- $2 parent id, $3 parent run id: the executions the end of that run
-- terminated by parent-close policy — its children and, recursively, theirs
-- (each run ends once, so each is listed for exactly one ended run).
WITH RECURSIVE closed AS (
    SELECT e.* FROM azync_workflow_executions e
    WHERE e.parent_id = $2 AND e.parent_run_id = $3 AND e.state = 'terminated'
      AND e.failure_reason = 'parent workflow ' || $2::text
                             || ' closed (parent-close policy terminate)'
    UNION ALL
    SELECT g.* FROM azync_workflow_executions g
    JOIN closed c ON g.parent_id = c.id AND g.parent_run_id = coalesce(c.run_id, c.id)
    WHERE g.state = 'terminated'
      AND g.failure_reason = 'parent workflow ' || c.id::text
                             || ' closed (parent-close policy terminate)'
)
SELECT *, $1::timestamptz AS at FROM closed

-- name: workflow_runs_vacuum
-- $2 retention: earlier runs (and, cascading, their histories) that ended
-- before now - retention. Returns how many were removed.
WITH d AS (
    DELETE FROM azync_workflow_runs
    WHERE ended_at < coalesce($1::timestamptz, now()) - $2::interval
    RETURNING 1
)
SELECT count(*) FROM d

-- Uncertain operations: reconcile-hook bookkeeping and late reports.

-- name: uncertain_list_unreconciled
-- $2 kinds text[], $3 limit: uncertain operations of these kinds whose current
-- uncertain attempt has no reconcile verdict recorded yet (one hook call per
-- uncertain episode; a retry decision starts a new attempt, hence a new episode).
SELECT j.id, j.run_id, e.name AS workflow_name, j.kind, j.task_key, j.payload, j.meta,
       j.attempt, j.uncertain_since, j.uncertain_reason, $1::timestamptz AS at
FROM azync_jobs j
JOIN azync_workflow_executions e ON e.id = j.run_id
WHERE j.state = 'uncertain' AND j.source = 'workflow' AND j.kind = ANY($2::text[])
  AND NOT EXISTS (
      SELECT 1 FROM azync_job_attempts a
      WHERE a.job_id = j.id AND a.attempt = j.attempt AND a.error LIKE 'reconcile: %')
ORDER BY j.uncertain_since, j.id
LIMIT $3

-- name: uncertain_lock_episode
-- $2 id, $3 attempt: lock an operation still uncertain at this attempt.
SELECT id, run_id, attempt, $1::timestamptz AS at FROM azync_jobs
WHERE id = $2 AND attempt = $3 AND state = 'uncertain' AND source = 'workflow'
FOR UPDATE

-- name: uncertain_record_verdict
-- $2 id, $3 attempt, $4 text: record the reconcile hook's verdict once per episode.
INSERT INTO azync_job_attempts (job_id, attempt, error, at)
SELECT $2, $3, 'reconcile: ' || $4, coalesce($1::timestamptz, now())
WHERE NOT EXISTS (
    SELECT 1 FROM azync_job_attempts
    WHERE job_id = $2 AND attempt = $3 AND error LIKE 'reconcile: %')
RETURNING id

-- name: uncertain_record_late_outcome
-- $2 id, $3 attempt, $4 text: audit row of a late report that was refused.
INSERT INTO azync_job_attempts (job_id, attempt, error, at)
VALUES ($2, $3, 'late outcome ignored: ' || $4, coalesce($1::timestamptz, now()))
RETURNING id

-- name: uncertain_op_get
-- $2 id: an operation row with its execution's name (resolve by id, CLI).
SELECT j.*, e.name AS workflow_name, $1::timestamptz AS at
FROM azync_jobs j
JOIN azync_workflow_executions e ON e.id = j.run_id
WHERE j.id = $2 AND j.source = 'workflow' AND j.task_key <> '$wft'

-- Queries and updates of workflow executions (see migration 0010).

-- name: workflow_query_request
-- $2 query id, $3 workflow id, $4 query name, $5 args, $6 timeout interval,
-- $7 channel: insert a pending query of a live or finished execution and
-- wake the workers. No row = no such execution.
WITH ins AS (
    INSERT INTO azync_workflow_queries (id, workflow_id, workflow_name, name, args, deadline,
                                        created_at)
    SELECT $2, e.id, e.name, $4, $5, coalesce($1::timestamptz, now()) + $6::interval,
           coalesce($1::timestamptz, now())
    FROM azync_workflow_executions e
    WHERE e.id = $3
    RETURNING workflow_name
)
SELECT workflow_name, pg_notify($7, 'workflow:$query') IS NULL AS notified FROM ins

-- name: workflow_query_claim
-- $2 workflow names text[], $3 limit: claim the oldest pending, unexpired
-- queries of these workflows (SKIP LOCKED), and drop rows whose deadline
-- passed a minute ago (their callers gave up).
WITH stale AS (
    DELETE FROM azync_workflow_queries
    WHERE deadline < coalesce($1::timestamptz, now()) - interval '1 minute'
), picked AS (
    SELECT id FROM azync_workflow_queries
    WHERE state = 'pending' AND workflow_name = ANY($2::text[])
      AND deadline > coalesce($1::timestamptz, now())
    ORDER BY created_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE azync_workflow_queries q
SET state = 'claimed'
FROM picked
WHERE q.id = picked.id
RETURNING q.id, q.workflow_id, q.workflow_name, q.name, q.args

-- name: workflow_query_answer
-- $2 query id, $3 state (answered | failed), $4 answer, $5 error type,
-- $6 message, $7 channel: record the answer of a claimed query and wake its
-- caller. No row = withdrawn meanwhile.
WITH up AS (
    UPDATE azync_workflow_queries
    SET state = $3, answer = $4, error_type = $5, message = $6
    WHERE id = $2 AND state = 'claimed' AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
    RETURNING workflow_id
)
SELECT pg_notify($7, 'workflow.query:' || workflow_id::text) IS NULL AS notified FROM up

-- name: workflow_query_take
-- $2 query id, $3 withdraw: delete the query when it was answered (or, with
-- $3, whatever its state) and return it. No row = not answered yet.
DELETE FROM azync_workflow_queries
WHERE id = $2 AND (state IN ('answered', 'failed') OR $3::boolean)
RETURNING state, answer, error_type, message, $1::timestamptz AS at

-- name: workflow_update_get
-- $2 workflow id, $3 update id
SELECT name, state, result, error_type, message, $1::timestamptz AS at
FROM azync_workflow_updates
WHERE workflow_id = $2 AND update_id = $3

-- name: workflow_trace_context
-- $2 id: the W3C carrier recorded when the execution started (no row: none).
SELECT trace_context FROM azync_workflow_executions
WHERE id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused

-- Timeouts (migration 0029), enforced by the leader's maintenance on the
-- database clock. Rows without a timeout are in none of the indexes read here.

-- name: workflow_timeouts_due
-- $2 limit: live executions whose earlier deadline passed (index
-- azync_workflow_executions_timeout), earliest first.
SELECT id FROM azync_workflow_executions
WHERE timeout_at IS NOT NULL AND state IN ('running', 'suspended')
  AND timeout_at <= coalesce($1::timestamptz, now())
ORDER BY timeout_at
LIMIT $2

-- name: workflow_timeout_lock
-- $2 id: lock a live execution whose deadline still passed (a continue-as-new
-- may have moved the run deadline meanwhile) and say which elapsed: the
-- execution timeout when its deadline passed, else the run timeout.
SELECT e.state, e.name, e.created_at,
       CASE WHEN e.created_at + e.execution_timeout <= coalesce($1::timestamptz, now())
            THEN 'execution' ELSE 'run' END AS kind,
       CASE WHEN e.created_at + e.execution_timeout <= coalesce($1::timestamptz, now())
            THEN e.execution_timeout ELSE e.run_timeout END AS timeout
FROM azync_workflow_executions e
WHERE e.id = $2 AND e.state IN ('running', 'suspended')
  AND e.timeout_at <= coalesce($1::timestamptz, now())
FOR NO KEY UPDATE

-- name: workflow_op_deadlines_due
-- $2 limit: operations whose schedule-to-start deadline passed before any
-- lease (attempt 0), then those whose schedule-to-close deadline passed
-- while unsettled (indexes azync_jobs_start_deadline, azync_jobs_close_deadline).
(SELECT id, 'schedule_to_start' AS kind FROM azync_jobs
 WHERE start_deadline IS NOT NULL AND attempt = 0 AND state IN ('pending', 'scheduled')
   AND start_deadline <= coalesce($1::timestamptz, now())
 ORDER BY start_deadline
 LIMIT $2)
UNION ALL
(SELECT id, 'schedule_to_close' AS kind FROM azync_jobs
 WHERE close_deadline IS NOT NULL AND state IN ('pending', 'scheduled', 'active', 'paused')
   AND close_deadline <= coalesce($1::timestamptz, now())
 ORDER BY close_deadline
 LIMIT $2)

-- name: workflow_op_timeout_lock
-- $2 id, $3 kind: lock one operation whose deadline of that kind still
-- passed (skipped when another transaction holds it: next tick), with the
-- timeout's length.
SELECT j.*, CASE WHEN $3 = 'schedule_to_start' THEN j.start_deadline - j.enqueued_at
                 ELSE j.close_deadline - j.enqueued_at END AS timeout
FROM azync_jobs j
WHERE j.id = $2 AND j.source = 'workflow' AND j.task_key <> '$wft'
  AND CASE WHEN $3 = 'schedule_to_start'
           THEN j.start_deadline <= coalesce($1::timestamptz, now()) AND j.attempt = 0
                AND j.state IN ('pending', 'scheduled')
           ELSE j.close_deadline <= coalesce($1::timestamptz, now())
                AND j.state IN ('pending', 'scheduled', 'active', 'paused') END
FOR UPDATE SKIP LOCKED

-- name: workflow_op_time_out
-- $2 id, $3 last_error: dead-letter an operation locked by
-- workflow_op_timeout_lock, its lease token cleared (a worker still running
-- an attempt loses its fence: its report is late and ignored).
UPDATE azync_jobs
SET state = 'dead', lease_token = NULL, lease_until = NULL, last_error = $3,
    completed_at = coalesce($1::timestamptz, now()), updated_at = coalesce($1::timestamptz, now())
WHERE id = $2
RETURNING kind

-- name: workflow_reset
-- $2 channel, $3 id, $4 expected next_seq, $5 keep (last seq kept), $6 new
-- run id, $7 reason, $8 execution keys of the operations to enqueue again
-- text[], $9 seqs of the timers to start again bigint[]. ONLY after
-- workflow_lock and workflow_terminate_lock_jobs in the same transaction.
-- One row (none: no such execution); ok = false when next_seq is not $4 or
-- $5 is out of range (nothing written). See azync_workflow_reset (migration 0030).
SELECT * FROM azync_workflow_reset(coalesce($1::timestamptz, now()), $2, $3, $4, $5, $6, $7,
                                   $8::text[], $9::bigint[])

-- name: workflow_op_transaction_open
-- $2 job id, $3 lease_token, $4 run id, $5 search_path for the rest of the
-- transaction. Opens a transactional step: checks the operation is active
-- under the token (no lock: a frozen attempt must not keep the reaper from
-- taking it; the outcome statement is the fence that counts), then switches
-- the transaction to the caller's search_path (LOCAL: the store's comes back
-- at the end of the transaction). No row = stale token, nothing set.
SELECT j.id, set_config('search_path', $5::text, true) AS search_path
FROM azync_jobs j
WHERE j.id = $2 AND j.lease_token = $3 AND j.state = 'active' AND j.source = 'workflow'
  AND j.task_key <> '$wft' AND j.run_id = $4
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz

-- name: workflow_task_next_due
-- $2 kind, $3 task queues text[] and $4 workflow names text[] the caller
-- serves (NULL = any). Seconds from the clock until the earliest scheduled
-- workflow task (a durable timer, a retry) of those is due (NULL: none); one
-- index probe per served (queue, name) pair (azync_jobs_workflow_task_timed).
WITH pairs AS (
    SELECT q.q, n.n FROM unnest($3::text[]) AS q(q), unnest($4::text[]) AS n(n)
    UNION
    SELECT j.task_queue, j.workflow_name FROM azync_jobs j
    WHERE ($3::text[] IS NULL OR $4::text[] IS NULL)
      AND j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
      AND ($3::text[] IS NULL OR j.task_queue = ANY($3::text[]))
      AND ($4::text[] IS NULL OR j.workflow_name = ANY($4::text[]))
)
SELECT extract(epoch FROM min(t.run_at) - coalesce($1::timestamptz, now()))::float8
FROM pairs p
CROSS JOIN LATERAL (
    SELECT j.run_at FROM azync_jobs j
    WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
      AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = $2
    ORDER BY j.run_at, j.id
    LIMIT 1
) t
