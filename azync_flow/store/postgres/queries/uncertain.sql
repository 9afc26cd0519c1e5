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
