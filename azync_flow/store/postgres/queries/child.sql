-- Child executions and continue-as-new (migration 0009). $1 is the clock
-- override, as everywhere.

-- name: workflow_children_start
-- $2 parent id, $3 parent run id, $4 ChildStarted seqs bigint[], $5 child ids
-- uuid[], $6 names text[], $7 versions text[], $8 inputs bytea[], $9
-- parent-close policies text[], $10 trace contexts text[] (json), $11
-- channel. Inserts each child execution with its first workflow task;
-- an id already taken is left alone (inserted = false; ours = it is this
-- parent run's child from this seq, i.e. an earlier commit of the same start).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), req AS (
    SELECT u.*, c.t
    FROM unnest($4::bigint[], $5::uuid[], $6::text[], $7::text[], $8::bytea[], $9::text[],
                $10::text[]) WITH ORDINALITY
         AS u(seq, id, name, version, input, policy, carrier, ord),
         clock c
), ins AS (
    INSERT INTO azync_workflow_executions (id, name, version, state, input, trace_context,
                                           parent_id, parent_run_id, parent_seq,
                                           parent_close_policy, created_at, updated_at)
    SELECT r.id, r.name, r.version, 'running', r.input, r.carrier::jsonb, $2, $3, r.seq,
           r.policy, r.t, r.t
    FROM req r
    ORDER BY r.ord
    ON CONFLICT DO NOTHING
    RETURNING id, created_at
), task AS (
    INSERT INTO azync_jobs (id, source, kind, state, run_at, run_id, task_key,
                            enqueued_at, updated_at)
    SELECT gen_random_uuid(), 'workflow', '$wft', 'pending', created_at, id, '$wft',
           created_at, created_at
    FROM ins
    RETURNING kind
), wake AS (
    SELECT pg_notify($11, 'workflow:$wft') FROM (SELECT 1 FROM task LIMIT 1) k
)
SELECT r.seq, r.id, i.id IS NOT NULL AS inserted,
       coalesce(x.parent_id = $2 AND x.parent_run_id = $3 AND x.parent_seq = r.seq, false)
           AS ours,
       (SELECT count(*) FROM task) AS tasks, (SELECT count(*) FROM wake) AS woken
FROM req r
LEFT JOIN ins i ON i.id = r.id
LEFT JOIN azync_workflow_executions x ON x.id = r.id
ORDER BY r.ord

-- name: workflow_children_signal
-- $2 child ids uuid[], $3 names text[], $4 payloads bytea[], $5 message ids
-- text[], $6 channel. Buffers each signal for its child when the child is
-- live (children locked in id order first, as signal_workflow locks one),
-- deduplicated by (name, message id), and makes a running child's workflow
-- task due. Returns the number of signals buffered.
WITH live AS (
    SELECT id, state FROM azync_workflow_executions
    WHERE id = ANY($2::uuid[]) AND state IN ('running', 'suspended')
    ORDER BY id
    FOR NO KEY UPDATE
), ins AS (
    INSERT INTO azync_workflow_signals (workflow_id, name, message_id, payload, created_at)
    SELECT u.id, u.name, u.message_id, u.payload, coalesce($1::timestamptz, now())
    FROM unnest($2::uuid[], $3::text[], $4::bytea[], $5::text[]) WITH ORDINALITY
         AS u(id, name, payload, message_id, ord)
    JOIN live l ON l.id = u.id
    ORDER BY u.ord
    ON CONFLICT DO NOTHING
    RETURNING workflow_id
), wake AS (
    SELECT azync_workflow_wake_task(l.id, coalesce($1::timestamptz, now()), $6)
    FROM live l
    WHERE l.state = 'running' AND l.id IN (SELECT workflow_id FROM ins)
)
SELECT (SELECT count(*) FROM ins) AS buffered, (SELECT count(*) FROM wake) AS woken

-- name: workflow_continue
-- $2 id, $3 new input, $4 new run id, $5 the pass saw the cancel request,
-- $6 channel: azync_workflow_continue (migration 0009). Returns the new
-- run number (0 = the execution was not running).
SELECT azync_workflow_continue($2, $3, $4, $5, coalesce($1::timestamptz, now()), $6)

-- name: workflow_runs
-- $2 id: the earlier runs of an execution (continue-as-new), oldest first.
SELECT run_no, run_id, input, started_at, ended_at, events, $1::timestamptz AS at
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

-- name: workflow_children_cancel
-- $2 child ids uuid[], $3 channel: record a cancel request on each live child
-- (locked in id order) and make a running child's workflow task due.
WITH live AS (
    SELECT id, state FROM azync_workflow_executions
    WHERE id = ANY($2::uuid[]) AND state IN ('running', 'suspended')
    ORDER BY id
    FOR NO KEY UPDATE
), req AS (
    UPDATE azync_workflow_executions e
    SET cancel_requested = true, updated_at = coalesce($1::timestamptz, now())
    FROM live l
    WHERE e.id = l.id
    RETURNING e.id, l.state
), wake AS (
    SELECT azync_workflow_wake_task(r.id, coalesce($1::timestamptz, now()), $3)
    FROM req r WHERE r.state = 'running'
)
SELECT (SELECT count(*) FROM req) AS requested, (SELECT count(*) FROM wake) AS woken

-- name: workflow_runs_vacuum
-- $2 retention: earlier runs (and, cascading, their histories) that ended
-- before now - retention. Returns how many were removed.
WITH d AS (
    DELETE FROM azync_workflow_runs
    WHERE ended_at < coalesce($1::timestamptz, now()) - $2::interval
    RETURNING 1
)
SELECT count(*) FROM d
