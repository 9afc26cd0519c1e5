-- DAG verbs (contract DAGStore). $1 is always the clock override:
-- coalesce($1, now()). DAG tasks are azync_jobs rows with source = 'dag'.
-- Header states: running, suspended, compensating, paused (live);
-- succeeded, failed, cancelled (terminal).

-- name: dag_insert_header
-- $2 id, $3 name, $4 on_failure, $5 idempotency_key, $6 meta, $7 trace_context
INSERT INTO azync_dags (id, name, state, on_failure, idempotency_key, meta, trace_context,
                        created_at, updated_at)
VALUES ($2, $3, 'running', $4, $5, $6::jsonb, $7::jsonb,
        coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
ON CONFLICT (name, idempotency_key)
    WHERE idempotency_key <> '' AND state IN ('running', 'suspended', 'compensating', 'paused')
    DO NOTHING
RETURNING id

-- name: dag_find_live_key
-- $2 name, $3 idempotency_key
SELECT id FROM azync_dags
WHERE name = $2 AND idempotency_key = $3 AND idempotency_key <> ''
  AND state IN ('running', 'suspended', 'compensating', 'paused')
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused

-- name: dag_insert_tasks
-- $2 dag_id, $3 meta, $4 keys, $5 kinds, $6 payloads, $7 max_attempts,
-- $8 compensation_kinds, $9 compensation_payloads, $10 signal_names,
-- $11 sleep_fors, $12 ignore_dead_deps, $13 deadlines, $14 has_deps, $15 channel,
-- $16 task queues
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), src AS (
    SELECT * FROM unnest($4::text[], $5::text[], $6::bytea[], $7::int[], $8::text[],
                         $9::bytea[], $10::text[], $11::interval[], $12::boolean[],
                         $13::interval[], $14::boolean[], $16::text[])
        AS s(key, kind, payload, max_attempts, comp_kind, comp_payload, signal_name,
             sleep_for, ignore_dead, deadline, has_deps, task_queue)
), ins AS (
    INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                            max_attempts_explicit, dag_id, task_key, signal_name,
                            compensation_kind, compensation_payload, sleep_for,
                            ignore_dead_deps, snooze_budget, enqueued_at, updated_at,
                            task_queue)
    SELECT gen_random_uuid(), 'dag', s.kind,
           CASE WHEN s.has_deps THEN 'blocked'
                WHEN s.kind = '$sleep' THEN 'scheduled'
                WHEN s.kind = '$signal' THEN 'waiting'
                ELSE 'pending' END,
           s.payload, $3::jsonb,
           CASE WHEN s.kind = '$sleep' AND NOT s.has_deps THEN c.t + s.sleep_for ELSE c.t END,
           s.max_attempts, s.max_attempts > 0, $2, s.key, s.signal_name, s.comp_kind,
           s.comp_payload, s.sleep_for, s.ignore_dead,
           CASE WHEN s.deadline > interval '0' THEN s.deadline END, c.t, c.t,
           s.task_queue
    FROM src s, clock c
    RETURNING kind, state
), stat AS (
    SELECT azync_job_count((SELECT t FROM clock),
                           array_agg(ROW('dag', kind, 1, 0, 0, 0)::azync_job_delta))
    FROM ins WHERE kind NOT IN ('$sleep', '$signal')
), wake AS (
    SELECT pg_notify($15, 'dag:' || kind) FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
)
SELECT (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM wake) AS woken
WHERE (SELECT count(*) FROM stat) >= 0

-- name: dag_insert_deps
-- $2 dag_id, $3 task_keys, $4 depends_on_keys
INSERT INTO azync_dag_deps (dag_id, task_key, depends_on_key)
SELECT $2, t, d FROM unnest($3::text[], $4::text[]) AS u(t, d)
WHERE $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused

-- name: dag_lock_live
-- $2 dag_id. Locks a live header; no row for a missing or terminal DAG.
SELECT id, state FROM azync_dags
WHERE id = $2 AND state IN ('running', 'suspended', 'compensating', 'paused')
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
FOR UPDATE

-- name: dag_signal_insert
-- $2 dag_id, $3 name, $4 message_id, $5 payload. No row = duplicate message id.
INSERT INTO azync_dag_signals (dag_id, name, message_id, payload, created_at)
VALUES ($2, $3, $4, $5, coalesce($1::timestamptz, now()))
ON CONFLICT (dag_id, name, message_id) WHERE message_id <> '' DO NOTHING
RETURNING id

-- name: dag_deliver_signals
-- $2 dag ids (the caller holds their header locks), $3 channel. Pairs the n-th oldest unconsumed
-- signal of (dag, name) with the n-th deliverable task reacting to that name
-- (a waiting $signal task, or a scheduled $sleep task) of a running or
-- compensating DAG, settles each pair and marks its signal consumed. A signal
-- is consumed only when its task's update won, so concurrent deliverers never
-- lose or double-spend one.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), tasks AS (
    SELECT j.id, j.dag_id, j.signal_name,
           row_number() OVER (PARTITION BY j.dag_id, j.signal_name ORDER BY j.enqueued_at, j.task_key) AS rn
    FROM azync_jobs j JOIN azync_dags d ON d.id = j.dag_id
    WHERE j.dag_id IS NOT NULL AND j.signal_name <> ''
      AND j.dag_id = ANY($2::uuid[])
      AND d.state IN ('running', 'compensating')
      AND ((j.kind = '$signal' AND j.state = 'waiting') OR (j.kind = '$sleep' AND j.state = 'scheduled'))
), sigs AS (
    SELECT s.id, s.dag_id, s.name, s.payload,
           row_number() OVER (PARTITION BY s.dag_id, s.name ORDER BY s.id) AS rn
    FROM azync_dag_signals s
    WHERE s.consumed_at IS NULL AND s.dag_id = ANY($2::uuid[])
      AND EXISTS (SELECT 1 FROM tasks t WHERE t.dag_id = s.dag_id AND t.signal_name = s.name)
), pairs AS (
    SELECT t.id AS task_id, s.id AS sig_id, s.payload
    FROM tasks t JOIN sigs s ON s.dag_id = t.dag_id AND s.name = t.signal_name AND s.rn = t.rn
), done AS (
    UPDATE azync_jobs j
    SET state = CASE WHEN j.kind = '$signal' THEN 'succeeded' ELSE j.state END,
        result = CASE WHEN j.kind = '$signal' THEN p.payload ELSE j.result END,
        completed_at = CASE WHEN j.kind = '$signal' THEN c.t ELSE j.completed_at END,
        run_at = CASE WHEN j.kind = '$sleep' THEN c.t ELSE j.run_at END,
        updated_at = c.t
    FROM pairs p, clock c
    WHERE j.id = p.task_id
      AND ((j.kind = '$signal' AND j.state = 'waiting') OR (j.kind = '$sleep' AND j.state = 'scheduled'))
    RETURNING p.sig_id
), consumed AS (
    UPDATE azync_dag_signals s SET consumed_at = (SELECT t FROM clock)
    FROM done WHERE s.id = done.sig_id AND s.consumed_at IS NULL
    RETURNING s.id
), wake AS (
    SELECT pg_notify($3, 'dag:$tick') WHERE EXISTS (SELECT 1 FROM done)
)
SELECT (SELECT count(*) FROM consumed) AS delivered, (SELECT count(*) FROM wake) AS woken

-- name: dag_lock_signalled
-- Locks running/compensating headers holding an unconsumed signal that a
-- deliverable task reacts to (signals nobody waits for yet cost no lock).
SELECT d.id FROM azync_dags d
WHERE d.state IN ('running', 'compensating')
  AND EXISTS (
      SELECT 1 FROM azync_dag_signals s
      JOIN azync_jobs j ON j.dag_id = s.dag_id AND j.signal_name = s.name
      WHERE s.dag_id = d.id AND s.consumed_at IS NULL
        AND ((j.kind = '$signal' AND j.state = 'waiting')
             OR (j.kind = '$sleep' AND j.state = 'scheduled')))
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
ORDER BY d.id
FOR UPDATE OF d SKIP LOCKED

-- name: dag_notify_tick
-- $2 channel: wake the DAG scheduler.
SELECT pg_notify($2, 'dag:$tick') WHERE $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz

-- name: dag_pause
-- $2 dag_id, $3 reason
WITH hdr AS (
    UPDATE azync_dags
    SET state = 'paused', pause_reason = $3, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2 AND state = 'running'
    RETURNING id
), tasks AS (
    UPDATE azync_jobs SET state = 'paused', updated_at = coalesce($1::timestamptz, now())
    WHERE dag_id = (SELECT id FROM hdr) AND state IN ('pending', 'scheduled')
    RETURNING id
)
SELECT id, (SELECT count(*) FROM tasks) AS paused FROM hdr

-- name: dag_promote_unblocked
-- $2 channel, $3 since (NULL = every DAG; else only DAGs whose header or a
-- task changed at or after it). Blocked tasks of running/compensating DAGs
-- whose every dependency succeeded or was skipped (or, with
-- ignore_dead_deps, also died or was cancelled) move to waiting ($signal),
-- scheduled ($sleep, run_at = now + sleep_for) or pending.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), changed AS (
    SELECT dag_id FROM azync_jobs
    WHERE $3::timestamptz IS NOT NULL AND dag_id IS NOT NULL AND updated_at >= $3::timestamptz
    UNION
    SELECT id FROM azync_dags WHERE $3::timestamptz IS NOT NULL AND updated_at >= $3::timestamptz
), ready AS (
    SELECT j.id FROM azync_jobs j JOIN azync_dags d ON d.id = j.dag_id
    WHERE j.state = 'blocked' AND j.dag_id IS NOT NULL
      AND d.state IN ('running', 'compensating')
      AND ($3::timestamptz IS NULL OR d.id IN (SELECT dag_id FROM changed))
      -- no unsatisfied dependency (an edge naming no task is unsatisfied)
      AND NOT EXISTS (
          SELECT 1 FROM azync_dag_deps e
          LEFT JOIN azync_jobs u ON u.dag_id = e.dag_id AND u.task_key = e.depends_on_key
          WHERE e.dag_id = j.dag_id AND e.task_key = j.task_key
            AND (u.state IS NULL
                 OR NOT (u.state IN ('succeeded', 'skipped')
                         OR (j.ignore_dead_deps AND u.state IN ('dead', 'cancelled')))))
), moved AS (
    UPDATE azync_jobs j
    SET state = CASE WHEN j.kind = '$signal' THEN 'waiting'
                     WHEN j.kind = '$sleep' THEN 'scheduled' ELSE 'pending' END,
        run_at = CASE WHEN j.kind = '$sleep' THEN c.t + coalesce(j.sleep_for, interval '0')
                      ELSE c.t END,
        updated_at = c.t
    FROM ready r, clock c
    WHERE j.id = r.id AND j.state = 'blocked'
    RETURNING j.kind, j.state
), wake AS (
    SELECT pg_notify($2, 'dag:' || kind) FROM (SELECT DISTINCT kind FROM moved WHERE state = 'pending') k
)
SELECT (SELECT count(*) FROM moved) AS promoted, (SELECT count(*) FROM wake) AS woken

-- name: dag_complete_due_sleeps
-- $2 channel
WITH done AS (
    UPDATE azync_jobs
    SET state = 'succeeded', completed_at = coalesce($1::timestamptz, now()),
        updated_at = coalesce($1::timestamptz, now())
    -- 'pending' too: a generic promote_due(source='dag') may have moved it
    WHERE state IN ('scheduled', 'pending') AND kind = '$sleep' AND dag_id IS NOT NULL
      AND run_at <= coalesce($1::timestamptz, now())
    RETURNING id
), wake AS (
    SELECT pg_notify($2, 'dag:$tick') WHERE EXISTS (SELECT 1 FROM done)
)
SELECT (SELECT count(*) FROM done) AS completed, (SELECT count(*) FROM wake) AS woken

-- name: dag_failure_candidates
-- Locks running DAGs holding at least one triggering dead task and returns
-- their policy, sorted triggering keys and failure reason (every dead task
-- with its error, root cause first). A dead task triggers unless it has
-- dependents and every one of them declares ignore_dead_deps.
SELECT d.id, d.on_failure, azync_dag_dead_reason(d.id) AS reason,
       (SELECT array_agg(x.task_key ORDER BY x.task_key) FROM azync_jobs x
        WHERE x.dag_id = d.id AND x.state = 'dead'
          AND NOT (EXISTS (SELECT 1 FROM azync_dag_deps e
                           WHERE e.dag_id = x.dag_id AND e.depends_on_key = x.task_key)
                   AND NOT EXISTS (SELECT 1 FROM azync_dag_deps e
                                   JOIN azync_jobs y ON y.dag_id = e.dag_id AND y.task_key = e.task_key
                                   WHERE e.dag_id = x.dag_id AND e.depends_on_key = x.task_key
                                     AND NOT y.ignore_dead_deps))) AS dead_tasks
FROM azync_dags d
WHERE d.state = 'running'
  AND d.id IN (SELECT dag_id FROM azync_jobs WHERE state = 'dead' AND dag_id IS NOT NULL)
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
ORDER BY d.id
FOR UPDATE OF d SKIP LOCKED

-- name: dag_suspend_many
-- $2 dag ids, $3 failure reasons, $4 triggering dead keys (one JSON array per
-- DAG), $5 channel. Publishes one azync.dag.failed event per DAG suspended, in
-- this statement (so in the caller's transaction).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), targets AS (
    SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[]) AS r(id, reason, triggered)
), hdr AS (
    UPDATE azync_dags d
    SET state = 'suspended', failure_reason = r.reason, updated_at = c.t
    FROM targets r, clock c
    WHERE d.id = r.id AND d.state IN ('running', 'suspended')
    RETURNING d.id, d.name, d.state, d.on_failure, d.failure_reason, r.triggered
), dag_events AS (
    SELECT h.id AS dag_id, 'azync.dag.failed' AS type,
           json_build_object(
               'dag_id', h.id, 'name', h.name, 'policy', h.on_failure, 'state', h.state,
               'reason', h.failure_reason, 'triggered_by', h.triggered::json,
               'dead_tasks', (SELECT coalesce(json_agg(x.task_key ORDER BY x.task_key), '[]'::json)
                              FROM azync_jobs x WHERE x.dag_id = h.id AND x.state = 'dead')) AS body
    FROM hdr h
)
-- @publish_dag_events $5
SELECT h.id, (SELECT count(*) FROM dag_ev) AS events, (SELECT count(*) FROM dag_ev_wake) AS ev_woken
FROM hdr h

-- name: dag_compensate_many
-- $2 dag ids, $3 failure reasons, $4 channel, $5 policy fired (false: a manual
-- CompensateDAG), $6 triggering dead keys (one JSON array per DAG). Cancels
-- the non-terminal tasks, inserts one "comp:<key>" task per succeeded task
-- that declared a compensation, chained in reverse completion order (the
-- first pending, the rest blocked behind their predecessor), and moves each
-- DAG to compensating, or straight to failed when it has nothing to
-- compensate. Compensation tasks carry the task meta plus the DAG's trace
-- context. Publishes, in this statement: azync.dag.failed when the policy
-- fired, azync.dag.compensation_started when the DAG now compensates, and
-- azync.dag.settled when it failed outright.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), targets AS (
    SELECT * FROM unnest($2::uuid[], $3::text[], $6::text[]) AS r(id, reason, triggered)
), cancelled AS (
    UPDATE azync_jobs j SET state = 'cancelled', lease_until = NULL, updated_at = c.t
    FROM clock c
    WHERE j.dag_id IN (SELECT id FROM targets)
      AND j.state IN ('pending', 'scheduled', 'blocked', 'waiting')
      AND j.task_key NOT LIKE 'comp:%' -- a manual compensate keeps an existing chain
    RETURNING j.id
), src AS (
    SELECT j.dag_id, j.task_key, j.compensation_kind, j.compensation_payload,
           j.meta || h.trace_context AS meta, j.task_queue,
           row_number() OVER (PARTITION BY j.dag_id
                              ORDER BY j.completed_at DESC, j.updated_at DESC, j.task_key DESC) AS rn
    FROM azync_jobs j JOIN azync_dags h ON h.id = j.dag_id
    WHERE j.dag_id IN (SELECT id FROM targets) AND j.state = 'succeeded'
      AND j.compensation_kind <> '' AND j.task_key NOT LIKE 'comp:%'
), ins AS (
    INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, dag_id, task_key,
                            enqueued_at, updated_at, task_queue)
    SELECT gen_random_uuid(), 'dag', s.compensation_kind,
           CASE WHEN s.rn = 1 THEN 'pending' ELSE 'blocked' END,
           coalesce(s.compensation_payload, 'null'::bytea), s.meta, c.t, s.dag_id,
           'comp:' || s.task_key, c.t, c.t, s.task_queue
    FROM src s, clock c
    ON CONFLICT (dag_id, task_key) WHERE dag_id IS NOT NULL DO NOTHING
    RETURNING kind, state
), deps AS (
    INSERT INTO azync_dag_deps (dag_id, task_key, depends_on_key)
    SELECT a.dag_id, 'comp:' || a.task_key, 'comp:' || b.task_key
    FROM src a JOIN src b ON b.dag_id = a.dag_id AND b.rn = a.rn - 1
    ON CONFLICT DO NOTHING
), hdr AS (
    UPDATE azync_dags d
    SET state = CASE WHEN EXISTS (SELECT 1 FROM src WHERE src.dag_id = d.id)
                     THEN 'compensating' ELSE 'failed' END,
        completed_at = CASE WHEN EXISTS (SELECT 1 FROM src WHERE src.dag_id = d.id)
                            THEN NULL ELSE c.t END,
        failure_reason = r.reason, updated_at = c.t
    FROM targets r, clock c
    WHERE d.id = r.id
    RETURNING d.id, d.name, d.state, d.on_failure, d.failure_reason, r.triggered, d.created_at,
              d.trace_context
), wake AS (
    SELECT pg_notify($4, 'dag:' || kind) FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
), dead AS (
    SELECT h.id, (SELECT coalesce(json_agg(x.task_key ORDER BY x.task_key), '[]'::json)
                  FROM azync_jobs x WHERE x.dag_id = h.id AND x.state = 'dead') AS keys
    FROM hdr h
), dag_events AS (
    SELECT h.id AS dag_id, 'azync.dag.failed' AS type,
           json_build_object(
               'dag_id', h.id, 'name', h.name, 'policy', h.on_failure, 'state', h.state,
               'reason', h.failure_reason, 'triggered_by', h.triggered::json,
               'dead_tasks', k.keys) AS body
    FROM hdr h JOIN dead k ON k.id = h.id
    WHERE $5::boolean
    UNION ALL
    SELECT h.id, 'azync.dag.compensation_started',
           json_build_object(
               'dag_id', h.id, 'name', h.name,
               'trigger', CASE WHEN $5::boolean THEN 'failure_policy' ELSE 'manual' END,
               'reason', h.failure_reason,
               'compensations', (SELECT json_agg('comp:' || s.task_key ORDER BY s.rn)
                                 FROM src s WHERE s.dag_id = h.id))
    FROM hdr h
    WHERE h.state = 'compensating'
    UNION ALL
    SELECT h.id, 'azync.dag.settled',
           json_build_object(
               'dag_id', h.id, 'name', h.name, 'state', h.state,
               'reason', h.failure_reason, 'dead_tasks', k.keys)
    FROM hdr h JOIN dead k ON k.id = h.id
    WHERE h.state = 'failed'
)
-- @publish_dag_events $4
SELECT id, name, state, failure_reason, created_at, trace_context,
       (SELECT count(*) FROM cancelled) AS cancelled,
       (SELECT count(*) FROM wake) AS woken, (SELECT count(*) FROM dag_ev) AS events,
       (SELECT count(*) FROM dag_ev_wake) AS ev_woken
FROM hdr

-- name: dag_lock_state
-- $2 dag_id: lock any header.
SELECT id, state, cancel_requested FROM azync_dags
WHERE id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
FOR UPDATE

-- name: dag_complete
-- $2 channel, $3 since (NULL = every DAG; else only DAGs whose header or a
-- task changed at or after it). Running DAGs with every task terminal and every dead task
-- tolerated (it has dependents and all of them ignore dead deps) succeed, or
-- fail when any task died; compensating DAGs whose compensation tasks are all
-- terminal fail (or land cancelled after CancelDAG), or suspend when a
-- compensation died.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), changed AS (
    SELECT dag_id FROM azync_jobs
    WHERE $3::timestamptz IS NOT NULL AND dag_id IS NOT NULL AND updated_at >= $3::timestamptz
    UNION
    SELECT id FROM azync_dags WHERE $3::timestamptz IS NOT NULL AND updated_at >= $3::timestamptz
), run_done AS (
    SELECT d.id,
           (SELECT string_agg(x.task_key, ', ' ORDER BY x.task_key) FROM azync_jobs x
            WHERE x.dag_id = d.id AND x.state = 'dead') AS dead_keys
    FROM azync_dags d
    WHERE d.state = 'running'
      AND ($3::timestamptz IS NULL OR d.id IN (SELECT dag_id FROM changed))
      AND NOT EXISTS (SELECT 1 FROM azync_jobs j WHERE j.dag_id = d.id
                      AND j.state NOT IN ('succeeded', 'skipped', 'dead', 'cancelled'))
      AND NOT EXISTS (
          SELECT 1 FROM azync_jobs x WHERE x.dag_id = d.id AND x.state = 'dead'
            AND NOT (EXISTS (SELECT 1 FROM azync_dag_deps e
                             WHERE e.dag_id = x.dag_id AND e.depends_on_key = x.task_key)
                     AND NOT EXISTS (SELECT 1 FROM azync_dag_deps e
                                     JOIN azync_jobs y ON y.dag_id = e.dag_id AND y.task_key = e.task_key
                                     WHERE e.dag_id = x.dag_id AND e.depends_on_key = x.task_key
                                       AND NOT y.ignore_dead_deps)))
), comp_done AS (
    SELECT d.id, d.cancel_requested,
           (SELECT string_agg(x.task_key, ', ' ORDER BY x.task_key) FROM azync_jobs x
            WHERE x.dag_id = d.id AND x.state = 'dead' AND x.task_key LIKE 'comp:%') AS dead_comps
    FROM azync_dags d
    WHERE d.state = 'compensating'
      AND ($3::timestamptz IS NULL OR d.id IN (SELECT dag_id FROM changed))
      -- every compensation is terminal, or blocked behind a dead one (the
      -- chain is linear: nothing can run until retry resets the dead one)
      AND NOT EXISTS (SELECT 1 FROM azync_jobs j WHERE j.dag_id = d.id AND j.task_key LIKE 'comp:%'
                      AND j.state NOT IN ('succeeded', 'skipped', 'dead', 'cancelled')
                      AND NOT (j.state = 'blocked' AND EXISTS (
                          SELECT 1 FROM azync_jobs x WHERE x.dag_id = d.id
                            AND x.task_key LIKE 'comp:%' AND x.state = 'dead')))
), run_upd AS (
    UPDATE azync_dags d
    SET state = CASE WHEN r.dead_keys IS NULL THEN 'succeeded' ELSE 'failed' END,
        failure_reason = CASE WHEN r.dead_keys IS NULL THEN d.failure_reason
                              ELSE azync_dag_dead_reason(d.id) END,
        completed_at = c.t, updated_at = c.t
    FROM run_done r, clock c
    WHERE d.id = r.id AND d.state = 'running'
    RETURNING d.id, d.name, d.state, d.failure_reason
), comp_upd AS (
    UPDATE azync_dags d
    SET state = CASE WHEN r.dead_comps IS NOT NULL THEN 'suspended'
                     WHEN d.cancel_requested THEN 'cancelled' ELSE 'failed' END,
        failure_reason = CASE WHEN r.dead_comps IS NULL THEN d.failure_reason
                              ELSE concat_ws('; ', nullif(d.failure_reason, ''),
                                             'dead compensation tasks: ' || r.dead_comps) END,
        completed_at = CASE WHEN r.dead_comps IS NULL THEN c.t END,
        updated_at = c.t
    FROM comp_done r, clock c
    WHERE d.id = r.id AND d.state = 'compensating'
    RETURNING d.id, d.name, d.state, d.failure_reason, r.dead_comps
), wake AS (
    SELECT pg_notify($2, 'dag:$settled')
    WHERE EXISTS (SELECT 1 FROM run_upd) OR EXISTS (SELECT 1 FROM comp_upd)
), upd AS (
    SELECT id, name, state, failure_reason FROM run_upd
    UNION ALL
    SELECT id, name, state, failure_reason FROM comp_upd WHERE state <> 'suspended'
), settled_runs AS (
    -- the runs that became terminal, for their run spans
    SELECT coalesce(json_agg(json_build_object(
               'id', u.id, 'name', u.name, 'state', u.state,
               'reason', coalesce(u.failure_reason, ''), 'created_at', d.created_at, 'trace_context', d.trace_context)), '[]'::json)::text
           AS runs
    FROM upd u JOIN azync_dags d ON d.id = u.id
), dag_events AS (
    SELECT u.id AS dag_id, 'azync.dag.settled' AS type,
           json_build_object(
               'dag_id', u.id, 'name', u.name, 'state', u.state, 'reason', u.failure_reason,
               'dead_tasks', (SELECT coalesce(json_agg(x.task_key ORDER BY x.task_key), '[]'::json)
                              FROM azync_jobs x WHERE x.dag_id = u.id AND x.state = 'dead')) AS body
    FROM upd u
    UNION ALL
    SELECT u.id, 'azync.dag.compensation_failed',
           json_build_object(
               'dag_id', u.id, 'name', u.name, 'state', u.state, 'reason', u.failure_reason,
               'dead_compensations', to_json(string_to_array(u.dead_comps, ', ')))
    FROM comp_upd u
    WHERE u.state = 'suspended'
)
-- @publish_dag_events $2
SELECT (SELECT count(*) FROM run_upd) + (SELECT count(*) FROM comp_upd) AS settled,
       (SELECT count(*) FROM wake) AS woken, (SELECT count(*) FROM dag_ev) AS events,
       (SELECT count(*) FROM dag_ev_wake) AS ev_woken,
       (SELECT runs FROM settled_runs) AS settled_runs

-- name: dag_task_results
-- $2 dag_id, $3 keys (empty = all)
SELECT task_key, state, result FROM azync_jobs
WHERE dag_id = $2 AND state IN ('succeeded', 'skipped')
  AND (cardinality($3::text[]) = 0 OR task_key = ANY($3::text[]))
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused

-- name: dag_ack_result
-- $2 id, $3 lease_token, $4 result (NULL = succeeded without result), $5 channel
WITH done AS (
    SELECT id FROM azync_job_settle(coalesce($1::timestamptz, now()), ARRAY[$2::uuid],
                                    ARRAY[$3::uuid], 'succeeded', NULL, $4::bytea, true)
), wake AS (
    SELECT pg_notify($5, 'dag:$tick') FROM done
)
SELECT (SELECT count(*) FROM wake) AS woken FROM done

-- name: dag_get
-- $2 dag_id
SELECT * FROM azync_dags WHERE id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz

-- name: dag_list
-- $2 name ('' = any), $3 state ('' = any), $4 offset, $5 limit
SELECT * FROM azync_dags
WHERE ($2 = '' OR name = $2) AND ($3 = '' OR state = $3)
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
ORDER BY created_at DESC, id DESC
OFFSET $4 LIMIT $5

-- name: dag_count
-- $2 name ('' = any), $3 state ('' = any)
SELECT count(*) FROM azync_dags WHERE ($2 = '' OR name = $2) AND ($3 = '' OR state = $3)
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused

-- name: dag_tasks
-- $2 dag_id. One row with a NULL job id when the DAG has no tasks; no row
-- when the DAG does not exist. Compensation tasks (created later) follow.
SELECT j.* FROM azync_dags d LEFT JOIN azync_jobs j ON j.dag_id = d.id
WHERE d.id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
ORDER BY j.enqueued_at, (j.task_key LIKE 'comp:%'), j.id

-- name: dag_deps
-- $2 dag_id
SELECT task_key, depends_on_key FROM azync_dag_deps
WHERE dag_id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
ORDER BY task_key, depends_on_key

-- name: dag_name_state_counts
SELECT name, state, count(*) AS n FROM azync_dags
WHERE $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused
GROUP BY name, state

-- name: dag_task_counts
-- $2 dag ids
SELECT dag_id, state, count(*) AS n FROM azync_jobs
WHERE dag_id = ANY($2::uuid[]) AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
GROUP BY dag_id, state

-- name: dag_retry
-- $2 dag_id, $3 channel. Resumes a live DAG: with a compensation chain only
-- the dead compensation tasks are reset and the DAG (re)enters compensating;
-- otherwise every dead task is reset and the DAG runs. Paused tasks are
-- released (pending when due, else scheduled) and every reset or released
-- task gets a fresh snooze budget (deadline_at cleared).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), hdr AS (
    SELECT d.id, d.state,
           EXISTS (SELECT 1 FROM azync_jobs j WHERE j.dag_id = d.id AND j.task_key LIKE 'comp:%')
               AS has_chain
    FROM azync_dags d
    WHERE d.id = $2 AND d.state IN ('running', 'suspended', 'compensating', 'paused')
), reset AS (
    UPDATE azync_jobs j
    SET state = 'pending', attempt = 0, reap_count = 0, deadline_at = NULL, run_at = c.t,
        lease_until = NULL, lease_token = NULL, updated_at = c.t
    FROM hdr h, clock c
    WHERE j.dag_id = h.id AND j.state = 'dead'
      AND (NOT h.has_chain OR j.task_key LIKE 'comp:%')
    RETURNING j.kind
), released AS (
    UPDATE azync_jobs j
    SET state = CASE WHEN j.kind = '$sleep' OR j.run_at > c.t THEN 'scheduled' ELSE 'pending' END,
        deadline_at = NULL, updated_at = c.t
    FROM hdr h, clock c
    WHERE j.dag_id = h.id
      AND (j.state = 'paused' OR (h.state = 'paused' AND j.state = 'scheduled'))
    RETURNING j.kind, j.state
), upd AS (
    UPDATE azync_dags d
    SET state = CASE WHEN h.has_chain THEN 'compensating' ELSE 'running' END,
        pause_reason = '', updated_at = c.t
    FROM hdr h, clock c
    WHERE d.id = h.id
    RETURNING d.id
), wake AS (
    SELECT pg_notify($3, 'dag:' || kind)
    FROM (SELECT kind FROM reset UNION SELECT kind FROM released WHERE state = 'pending'
          UNION SELECT '$tick') k
)
SELECT id, (SELECT count(*) FROM reset) AS reset, (SELECT count(*) FROM released) AS released,
       (SELECT count(*) FROM wake) AS woken
FROM upd

-- name: dag_cancel
-- $2 dag_id, $3 channel. A compensating DAG only records the request (its
-- compensation settles first, then CompleteDAGs lands it on cancelled).
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), hdr AS (
    UPDATE azync_dags d
    SET state = CASE WHEN d.state = 'compensating' THEN 'compensating' ELSE 'cancelled' END,
        cancel_requested = true,
        completed_at = CASE WHEN d.state = 'compensating' THEN NULL ELSE c.t END,
        updated_at = c.t
    FROM clock c
    WHERE d.id = $2 AND d.state IN ('running', 'suspended', 'compensating', 'paused')
    RETURNING d.id, d.name, d.state, d.failure_reason
), tasks AS (
    UPDATE azync_jobs j SET state = 'cancelled', updated_at = c.t
    FROM hdr h, clock c
    WHERE j.dag_id = h.id AND h.state = 'cancelled'
      AND j.state IN ('pending', 'scheduled', 'blocked', 'waiting', 'paused')
    RETURNING j.id
), wake AS (
    SELECT pg_notify($3, 'dag:$settled') FROM hdr
), dag_events AS (
    SELECT h.id AS dag_id, 'azync.dag.settled' AS type,
           json_build_object(
               'dag_id', h.id, 'name', h.name, 'state', h.state, 'reason', h.failure_reason,
               'dead_tasks', (SELECT coalesce(json_agg(x.task_key ORDER BY x.task_key), '[]'::json)
                              FROM azync_jobs x WHERE x.dag_id = h.id AND x.state = 'dead')) AS body
    FROM hdr h
    WHERE h.state = 'cancelled'
)
-- @publish_dag_events $3
SELECT id, state, (SELECT count(*) FROM tasks) AS cancelled, (SELECT count(*) FROM wake) AS woken,
       (SELECT count(*) FROM dag_ev) AS events, (SELECT count(*) FROM dag_ev_wake) AS ev_woken
FROM hdr

-- name: dag_vacuum
-- $2 retention
WITH gone AS (
    DELETE FROM azync_dags
    WHERE state IN ('succeeded', 'failed', 'cancelled')
      AND completed_at < coalesce($1::timestamptz, now()) - $2::interval
    RETURNING id
)
SELECT count(*) FROM gone

-- name: dag_dequeue
-- $2 kinds, $3 limit, $4 lease, $5 default_max_attempts, $6 task queues text[].
-- Leases due pending DAG tasks of any of the kinds on any of the queues (the
-- standalone runner's lease query; a Worker leases per kind through the plain
-- queue verbs).
WITH picked AS (
    SELECT id FROM azync_jobs
    WHERE state = 'pending' AND source = 'dag' AND kind = ANY($2::text[])
      AND task_queue = ANY($6::text[])
      AND run_at <= coalesce($1::timestamptz, now())
    ORDER BY azync_due_order(run_at, priority), id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
UPDATE azync_jobs j
SET state = 'active',
    attempt = j.attempt + 1,
    lease_token = azync_lease_token(),
    lease_until = coalesce($1::timestamptz, now()) + $4::interval,
    started_at = coalesce($1::timestamptz, now()),
    updated_at = coalesce($1::timestamptz, now()),
    max_attempts = CASE WHEN j.max_attempts_explicit OR j.max_attempts > 0 THEN j.max_attempts
                        ELSE $5::int END
FROM picked
WHERE j.id = picked.id
RETURNING j.*

-- name: dag_reap_expired
-- $2 max_reaps. Expired leases of DAG tasks return to pending with
-- reap_count + 1, or die (recording an attempt) once reap_count reaches max.
WITH clock AS (
    SELECT coalesce($1::timestamptz, now()) AS t
), upd AS (
    UPDATE azync_jobs j
    SET state = CASE WHEN j.reap_count + 1 >= $2 THEN 'dead' ELSE 'pending' END,
        reap_count = j.reap_count + 1,
        last_error = CASE WHEN j.reap_count + 1 >= $2
                          THEN 'lease expired ' || (j.reap_count + 1) || ' times' ELSE j.last_error END,
        failed_at = CASE WHEN j.reap_count + 1 >= $2 THEN c.t ELSE j.failed_at END,
        lease_until = NULL, lease_token = NULL, run_at = c.t, updated_at = c.t
    FROM clock c
    WHERE j.state = 'active' AND j.source = 'dag' AND j.lease_until < c.t
    RETURNING j.id, j.attempt, j.state, j.last_error, j.dag_id, j.task_key, j.meta, j.kind,
              j.started_at
), a AS (
    INSERT INTO azync_job_attempts (job_id, attempt, error, at)
    SELECT id, attempt, last_error, (SELECT t FROM clock) FROM upd WHERE state = 'dead'
)
SELECT (SELECT count(*) FROM upd) AS reaped, (SELECT count(*) FROM upd WHERE state = 'dead') AS killed,
       (SELECT coalesce(json_agg(json_build_object(
                   'dag_id', dag_id, 'task_key', task_key, 'attempt', attempt,
                   'dead', state = 'dead', 'meta', meta, 'kind', kind, 'started_at', started_at,
                   'dag_name', (SELECT d.name FROM azync_dags d WHERE d.id = upd.dag_id))
                   ORDER BY dag_id, task_key), '[]'::json)
        FROM upd)::text AS expired

-- name: dag_trace_context
-- $2 dag_id: the W3C carrier recorded when the run started (no row: no DAG).
SELECT trace_context FROM azync_dags
WHERE id = $2 AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz -- clock unused

-- name: dag_task_transaction_open
-- $2 task job id, $3 lease_token, $4 search_path for the rest of the
-- transaction. Opens a transactional task attempt: checks the task is active
-- under the token (no lock: a frozen attempt must not keep the reaper from
-- taking it; the ack is the fence that counts), then switches the transaction
-- to the caller's search_path (LOCAL). No row = stale token.
SELECT j.id, set_config('search_path', $4::text, true) AS search_path
FROM azync_jobs j
WHERE j.id = $2 AND j.lease_token = $3 AND j.state = 'active' AND j.source = 'dag'
  AND $1::timestamptz IS NOT DISTINCT FROM $1::timestamptz
