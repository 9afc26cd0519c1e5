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

-- name: workflow_update_outcomes_record
-- $2 workflow id, $3 update ids text[], $4 names text[], $5 states text[],
-- $6 results bytea[], $7 error types text[], $8 messages text[], $9 channel:
-- keep the outcomes a pass decided (the first outcome of an id wins) and
-- wake the callers.
WITH ins AS (
    INSERT INTO azync_workflow_updates (workflow_id, update_id, name, state, result, error_type,
                                        message, created_at)
    SELECT $2, u.id, u.name, u.state, u.result, u.error_type, u.message,
           coalesce($1::timestamptz, now())
    FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[], $7::text[], $8::text[])
         AS u(id, name, state, result, error_type, message)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM ins) AS written,
       pg_notify($9, 'workflow.update:' || $2::text) IS NULL AS notified

-- name: workflow_update_get
-- $2 workflow id, $3 update id
SELECT name, state, result, error_type, message, $1::timestamptz AS at
FROM azync_workflow_updates
WHERE workflow_id = $2 AND update_id = $3
