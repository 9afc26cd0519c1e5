-- Read-only views of the operations console (`azync-flow ui`), run by
-- ConsoleReads.console_rows inside a READ ONLY transaction. $1 is the clock
-- override like every query. Payloads come back cut (`*_head`, with their full
-- length) where a page shows a preview only.

-- name: console_execution_counts
-- Executions per state.
SELECT state, count(*) AS n FROM azync_workflow_executions
WHERE $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
GROUP BY state

-- name: console_executions
-- $2 state (NULL = any), $3 workflow name (NULL = any), $4 created at or
-- after (NULL = any), $5 created before (NULL = any), $6 business key (NULL =
-- any), $7 $8 keyset cursor (created_at, id) of the previous page's last row
-- (NULL = from the newest), $9 limit, $10 a jsonpath over the search
-- attributes (NULL = any; azync_flow.search.search_jsonpath). Newest first; a running row carries its
-- live workflow task's failures and last error (one index probe per row of
-- the page, after the LIMIT).
SELECT e.*, t.attempt - (t.state = 'active')::int AS task_failures, t.last_error AS task_error
FROM (
    SELECT id, name, version, state, business_idempotency_key, created_at, updated_at,
           completed_at, failure_reason, suspend_reason, parent_id, run_no,
           substring(input FROM 1 FOR 400) AS input_head, length(input) AS input_len,
           substring(result FROM 1 FOR 400) AS result_head, length(result) AS result_len
    FROM azync_workflow_executions
    WHERE ($2::text IS NULL OR state = $2)
      AND ($3::text IS NULL OR name = $3)
      AND ($4::timestamptz IS NULL OR created_at >= $4)
      AND ($5::timestamptz IS NULL OR created_at < $5)
      AND ($6::text IS NULL OR business_idempotency_key = $6)
      AND ($7::timestamptz IS NULL OR (created_at, id) < ($7::timestamptz, $8::uuid))
      AND ($10::jsonpath IS NULL OR search_attributes @@ $10::jsonpath)
      AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
    ORDER BY created_at DESC, id DESC
    LIMIT $9
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

-- name: console_blocked
-- $2 limit: running executions held up: their live workflow task has failed
-- or was left with a reason (an input it cannot decode), or a due workflow
-- task or pending activity of theirs has no live worker serving it; each with
-- its workflow task failures and what it waits for (azync_workflow_waits),
-- most failures first, then the longest unchanged.
WITH clock AS (SELECT coalesce($1::timestamptz, now()) AS at),
held AS (
    SELECT DISTINCT j.run_id
    FROM azync_jobs j, clock c
    WHERE j.source = 'workflow' AND j.state IN ('pending', 'scheduled', 'active')
      AND ((j.task_key = '$wft'
            AND ((j.last_error <> '' AND j.attempt - (j.state = 'active')::int > 0)
                 OR (j.blocked_reason <> '' AND j.state <> 'active')))
           OR (j.state = 'pending' AND j.run_at <= c.at AND NOT EXISTS (
                   SELECT 1 FROM azync_workers w
                   WHERE w.expires_at > c.at AND w.task_queues @> ARRAY[j.task_queue]
                     AND CASE WHEN j.task_key = '$wft' THEN w.workflows @> ARRAY[j.workflow_name]
                              ELSE w.activities @> ARRAY[j.kind] END)))
)
SELECT e.id, e.name, e.state, e.updated_at, coalesce(t.task_failures, 0) AS task_failures,
       coalesce(t.task_error, '') AS task_error, azync_workflow_waits(e.id, c.at) AS waits
FROM held h
JOIN azync_workflow_executions e ON e.id = h.run_id AND e.state = 'running'
CROSS JOIN clock c
LEFT JOIN LATERAL (
    SELECT j.attempt - (j.state = 'active')::int AS task_failures, j.last_error AS task_error
    FROM azync_jobs j
    WHERE j.run_id = e.id AND j.source = 'workflow' AND j.task_key = '$wft'
      AND j.state IN ('pending', 'scheduled', 'active')
    ORDER BY j.attempt DESC
    LIMIT 1
) t ON true
ORDER BY task_failures DESC, e.updated_at
LIMIT $2

-- name: console_operations
-- $2 execution id, $3 limit: its activity operations (not its workflow
-- tasks), oldest first, each with its failed attempts as parallel arrays
-- (attempt, error, at; oldest first) and the clock.
SELECT j.id, j.kind, j.state, j.attempt, j.max_attempts, j.payload, j.run_at, j.lease_until,
       j.last_error, j.task_key, j.enqueued_at, j.started_at, j.failed_at, j.completed_at,
       j.uncertain_reason, j.decision, j.decision_by, j.decision_note,
       coalesce($1::timestamptz, now()) AS at,
       coalesce(a.attempts, '{}') AS fail_attempts, coalesce(a.errors, '{}') AS fail_errors,
       coalesce(a.ats, '{}') AS fail_ats
FROM azync_jobs j
LEFT JOIN LATERAL (
    SELECT array_agg(x.attempt ORDER BY x.id) AS attempts, array_agg(x.error ORDER BY x.id) AS errors,
           array_agg(x.at ORDER BY x.id) AS ats
    FROM azync_job_attempts x WHERE x.job_id = j.id
) a ON true
WHERE j.run_id = $2 AND j.source = 'workflow' AND j.task_key <> '$wft'
ORDER BY j.enqueued_at, j.id
LIMIT $3

-- name: console_timers
-- $2 execution id: its timers (every run), by seq.
SELECT seq, fire_at, fired_at FROM azync_workflow_timers
WHERE workflow_id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
ORDER BY seq

-- name: console_children
-- $2 parent execution id, $3 limit: its child executions (any run), oldest first.
SELECT id, name, state, parent_run_id, parent_seq, created_at, completed_at, failure_reason
FROM azync_workflow_executions
WHERE parent_id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
ORDER BY created_at, id
LIMIT $3

-- name: console_buffered_signals
-- $2 execution id, $3 limit: signals accepted and not yet consumed, oldest first.
SELECT id, name, message_id, created_at, length(payload) AS payload_len
FROM azync_workflow_signals
WHERE workflow_id = $2 AND consumed_seq IS NULL
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
ORDER BY id
LIMIT $3

-- name: console_event_deliveries
-- $2 event id: its deliveries (one per subscriber, plus replays), by subscriber.
SELECT id, kind, state, attempt, max_attempts, replay, run_at, last_error, enqueued_at,
       completed_at
FROM azync_jobs
WHERE event_id = $2 AND source = 'event'
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
ORDER BY kind, enqueued_at, id

-- name: console_trace_context
-- $2 execution id: its run's W3C trace context (jsonb; no row when missing).
SELECT trace_context FROM azync_workflow_executions
WHERE id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
