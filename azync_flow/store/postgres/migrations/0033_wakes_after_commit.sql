-- Wake-ups after the commit: the pass commit sends no NOTIFY.
--
-- A transaction that sends NOTIFY holds a database-wide lock from its
-- pre-commit until its WAL flush, so every notifying commit waited for the
-- previous one's flush (14 ms of lock wait per workflow in the throughput
-- bench). The hot functions now call azync_wake instead of pg_notify: under
-- the transaction-local setting azync.defer_wakes = 'on' it appends the
-- payload to the transaction-local azync.wakes (one payload a line) instead
-- of notifying. azync_workflow_pass_commit turns the setting on for its own
-- execution (a function SET clause: nested calls see it, callers do not),
-- empties azync.wakes first, and the named query workflow_pass_commit
-- returns it as its wakes column, which the driver delivers after the
-- commit (store/postgres/_wake.py: this process's listeners directly, other
-- processes by one coalescing NOTIFY per store). Everywhere else (signals,
-- terminate, timeouts, the caller's own transactions) the same functions
-- notify in the commit as before.

CREATE FUNCTION azync_wake(p_channel text, p_payload text) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF current_setting('azync.defer_wakes', true) = 'on' THEN
        PERFORM set_config('azync.wakes',
                           coalesce(current_setting('azync.wakes', true), '') || p_payload || E'\n',
                           true);
    ELSE
        PERFORM pg_notify(p_channel, p_payload);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION azync_schedule_workflow_task(p_run uuid, p_kind text, p_run_at timestamp with time zone, p_at timestamp with time zone, p_channel text)
 RETURNS TABLE(id uuid, state text, kind text, inserted boolean)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH up AS (
        INSERT INTO azync_jobs AS j (id, source, kind, state, run_at, run_id, task_key,
                                     enqueued_at, updated_at, workflow_name, task_queue,
                                     priority)
        SELECT gen_random_uuid(), 'workflow', p_kind,
               CASE WHEN coalesce(p_run_at, p_at) > p_at THEN 'scheduled' ELSE 'pending' END,
               coalesce(p_run_at, p_at), p_run, '$wft', p_at, p_at, e.name, e.task_queue,
               e.priority
        FROM azync_workflow_executions e
        WHERE e.id = p_run
        ON CONFLICT (run_id)
            WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled')
            DO UPDATE SET
                run_at = least(j.run_at, EXCLUDED.run_at),
                state = CASE WHEN least(j.run_at, EXCLUDED.run_at) > EXCLUDED.updated_at
                             THEN 'scheduled' ELSE 'pending' END,
                updated_at = EXCLUDED.updated_at
        RETURNING j.id, j.state, j.kind, (j.xmax = 0) AS inserted
    ), wake AS (
        SELECT azync_wake(p_channel, 'workflow:' || u.kind) FROM up u WHERE u.state = 'pending'
    )
    SELECT u.id, u.state, u.kind, u.inserted FROM up u
    WHERE (SELECT count(*) FROM wake) >= 0;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_children_start(p_at timestamp with time zone, p_channel text, p_id uuid, p_run uuid, p_seqs bigint[], p_ids uuid[], p_names text[], p_versions text[], p_inputs bytea[], p_policies text[], p_carriers text[], p_routes text[])
 RETURNS SETOF uuid
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
BEGIN
    RETURN QUERY WITH req AS (
        SELECT u.*, coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
               coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority,
               make_interval(secs => (u.route::jsonb ->> 'execution_timeout_s')::float8)
                   AS execution_timeout,
               make_interval(secs => (u.route::jsonb ->> 'run_timeout_s')::float8)
                   AS run_timeout
        FROM unnest(p_seqs, p_ids, p_names, p_versions, p_inputs, p_policies, p_carriers,
                    p_routes) WITH ORDINALITY
             AS u(seq, id, name, version, input, policy, carrier, route, ord)
    ), ins AS (
        INSERT INTO azync_workflow_executions (id, name, version, state, input, trace_context,
                                               parent_id, parent_run_id, parent_seq,
                                               parent_close_policy, task_queue, priority,
                                               execution_timeout, run_timeout, timeout_at,
                                               created_at, updated_at)
        SELECT r.id, r.name, r.version, 'running', r.input, r.carrier::jsonb, p_id, p_run,
               r.seq, r.policy, r.task_queue, r.priority, r.execution_timeout, r.run_timeout,
               least(p_at + r.execution_timeout, p_at + r.run_timeout), p_at, p_at
        FROM req r
        ORDER BY r.ord
        ON CONFLICT DO NOTHING
        RETURNING id, name, task_queue, priority, created_at
    ), task AS (
        INSERT INTO azync_jobs (id, source, kind, state, run_at, run_id, task_key,
                                enqueued_at, updated_at, workflow_name, task_queue, priority)
        SELECT gen_random_uuid(), 'workflow', '$wft', 'pending', i.created_at, i.id, '$wft',
               i.created_at, i.created_at, i.name, i.task_queue, i.priority
        FROM ins i
        RETURNING run_id
    ), wake AS (
        SELECT azync_wake(p_channel, 'workflow:$wft') FROM (SELECT 1 FROM task LIMIT 1) k
    )
    SELECT t.run_id FROM task t WHERE (SELECT count(*) FROM wake) >= 0;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_finish_run(p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamp with time zone, p_channel text)
 RETURNS TABLE(retired bigint, undelivered integer)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    ex record;
    n int;
    seq bigint;
    ids bigint[];
    sigs jsonb;
    gone bigint;
BEGIN
    SELECT e.next_seq, e.name, e.trace_context INTO ex
    FROM azync_workflow_executions e
    WHERE e.id = p_id AND e.state IN ('running', 'suspended')
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT count(*)::int, array_agg(s.id ORDER BY s.id),
           jsonb_agg(jsonb_build_object('signal_id', s.id, 'name', s.name,
                                        'message_id', s.message_id) ORDER BY s.id)
    INTO n, ids, sigs
    FROM azync_workflow_signals s
    WHERE s.workflow_id = p_id AND s.consumed_seq IS NULL;
    seq := ex.next_seq;
    IF n > 0 THEN
        INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
        VALUES (p_id, seq, 'SignalsUndelivered',
                convert_to(jsonb_build_object('type', 'SignalsUndelivered', 'seq', seq,
                                              'signals', sigs)::text, 'UTF8'),
                p_at);
        UPDATE azync_workflow_signals SET consumed_seq = seq WHERE id = ANY(ids);
        PERFORM azync_publish_event(
            gen_random_uuid(), 'azync.workflow.signals_undelivered', 'workflow', p_id::text, 0,
            p_at,
            convert_to(jsonb_build_object('workflow_id', p_id, 'workflow_name', ex.name,
                                          'state', p_state, 'history_seq', seq,
                                          'count', n, 'signals', sigs)::text, 'UTF8'),
            ex.trace_context, p_channel, p_at);
        seq := seq + 1;
    END IF;
    UPDATE azync_workflow_executions
    SET state = p_state, result = p_result, failure_reason = p_reason,
        completed_at = p_at, updated_at = p_at, next_seq = seq, signals_undelivered = n
    WHERE id = p_id;
    UPDATE azync_jobs
    SET state = 'cancelled', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow' AND state IN ('pending', 'scheduled', 'paused');
    GET DIAGNOSTICS gone = ROW_COUNT;
    PERFORM azync_wake(p_channel, 'workflow.done:' || p_id::text);
    RETURN QUERY SELECT gone, n;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_ops_insert(p_at timestamp with time zone, p_channel text, p_id uuid, p_kinds text[], p_payloads bytea[], p_metas text[], p_keys text[], p_run_ats timestamp with time zone[], p_max_attempts integer[], p_routes text[], p_local_keys text[], p_local_lease interval, p_local_budget integer)
 RETURNS TABLE(task_key text, id uuid, kind text, state text, attempt integer, max_attempts integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, run_at timestamp with time zone, enqueued_at timestamp with time zone)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH existing AS (
        SELECT DISTINCT j.task_key FROM azync_jobs j
        WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_keys)
          AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
    ), wanted AS MATERIALIZED (
        SELECT u.*, coalesce(u.run_at, p_at) AS due,
               (u.run_at IS NULL AND u.key = ANY(coalesce(p_local_keys, '{}'))) AS local,
               coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
               coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority,
               coalesce(u.route::jsonb ->> 'limit_key',
                        CASE WHEN EXISTS (
                            SELECT 1 FROM azync_limit_scopes sc
                            WHERE sc.source = 'task_queue'
                              AND sc.kind = coalesce(u.route::jsonb ->> 'task_queue', 'default'))
                        THEN '' END) AS limit_key,
               gen_random_uuid() AS job_id, gen_random_uuid() AS token
        FROM unnest(p_kinds, p_payloads, p_metas, p_keys, p_run_ats, p_max_attempts, p_routes)
             WITH ORDINALITY AS u(kind, payload, meta, key, run_at, max_attempts, route, ord)
        WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.task_key = u.key)
    ), req AS MATERIALIZED (
        -- a local operation of a limited kind is leased only when admitted
        -- (CASE: the admission must not run for an operation left pending)
        SELECT w.*,
               CASE WHEN NOT w.local THEN false
                    WHEN w.limit_key IS NULL AND NOT EXISTS (
                             SELECT 1 FROM azync_limit_scopes sc
                             WHERE sc.source = 'workflow' AND sc.kind = w.kind) THEN true
                    ELSE azync_limit_admit(p_at, 'workflow', w.kind, coalesce(w.limit_key, ''),
                                           w.job_id, w.token, p_channel, w.task_queue) END
                   AS leased
        FROM wanted w
        ORDER BY w.ord
    ), ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at,
                                max_attempts, max_attempts_explicit, run_id, task_key,
                                enqueued_at, updated_at, attempt, lease_token,
                                lease_until, started_at, task_queue, priority, limit_key)
        SELECT r.job_id, 'workflow', r.kind,
               CASE WHEN r.leased THEN 'active' WHEN r.due > p_at THEN 'scheduled'
                    ELSE 'pending' END,
               r.payload, r.meta::jsonb, r.due,
               CASE WHEN r.leased AND r.max_attempts <= 0 THEN p_local_budget
                    ELSE r.max_attempts END,
               r.max_attempts > 0, p_id, r.key, p_at, p_at,
               CASE WHEN r.leased THEN 1 ELSE 0 END,
               CASE WHEN r.leased THEN r.token END,
               CASE WHEN r.leased THEN p_at + p_local_lease END,
               CASE WHEN r.leased THEN p_at END,
               r.task_queue, r.priority, r.limit_key
        FROM req r
        ORDER BY r.ord
        RETURNING task_key, id, kind, state, attempt, max_attempts, lease_token,
                  lease_until, started_at, run_at, enqueued_at
    ), wake AS (
        SELECT azync_wake(p_channel, 'workflow:' || k.kind)
        FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
    )
    SELECT i.* FROM ins i WHERE (SELECT count(*) FROM wake) >= 0;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_pass_commit(p_at timestamp with time zone, p_channel text, p_id uuid, p_run uuid, p_jobs uuid[], p_tokens uuid[], p_task boolean, p_errors text[], p_expected bigint, p_types text[], p_payloads bytea[], p_awaited text[], p_op_kinds text[], p_op_payloads bytea[], p_op_metas text[], p_op_keys text[], p_op_run_ats timestamp with time zone[], p_op_max_attempts integer[], p_op_routes text[], p_local_keys text[], p_local_lease interval, p_local_budget integer, p_timer_seqs bigint[], p_timer_delays interval[], p_fired bigint[], p_signal_ids bigint[], p_signal_seqs bigint[], p_update_ids text[], p_update_names text[], p_update_states text[], p_update_results bytea[], p_update_error_types text[], p_update_messages text[], p_child_seqs bigint[], p_child_ids uuid[], p_child_names text[], p_child_versions text[], p_child_inputs bytea[], p_child_policies text[], p_child_carriers text[], p_child_routes text[], p_child_signal_ids uuid[], p_child_signal_names text[], p_child_signal_payloads bytea[], p_child_signal_message_ids text[], p_child_cancels uuid[], p_outcome text, p_result bytea, p_reason text, p_suspend_seq bigint, p_new_run uuid, p_cancel_seen boolean, p_next_at timestamp with time zone, p_next_now boolean, p_signals_wake boolean, p_keep_lease interval)
 RETURNS TABLE(ok boolean, fenced bigint, state text, next_seq bigint, at timestamp with time zone, missing bigint[], leased_keys text[], leased_ids uuid[], leased_attempts integer[], leased_max_attempts integer[], leased_tokens uuid[], leased_until timestamp with time zone[], leased_at timestamp with time zone[])
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
 SET "azync.defer_wakes" TO 'on'
AS $function$
#variable_conflict use_column
DECLARE
    n bigint;
    ex record;
    st text;
    nxt bigint;
    lost bigint[];
    deltas azync_job_delta[];
    more azync_job_delta[];
    checkpoint boolean;
    ends boolean := p_outcome IS NOT NULL AND p_outcome <> 'suspend';
    kids record;
    appended int := 0;
    want timestamptz;
    t record;
    w bigint;
    l_keys text[]; l_ids uuid[]; l_attempts int[]; l_max int[]; l_tokens uuid[];
    l_until timestamptz[]; l_at timestamptz[];
BEGIN
    PERFORM set_config('azync.wakes', '', true);  -- this statement's wakes only
    -- Fence: the jobs, THEN the execution row.
    SELECT count(*) INTO n FROM (
        SELECT j.id FROM azync_jobs j
        JOIN unnest(p_jobs, p_tokens) AS u(id, token)
          ON j.id = u.id AND j.lease_token = u.token
        WHERE j.state = 'active' AND j.source = 'workflow' AND j.run_id = p_id
          AND (j.task_key = '$wft') = p_task
        ORDER BY j.id
        FOR UPDATE OF j
    ) locked;
    SELECT e.state, e.next_seq INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF n <> cardinality(p_jobs) OR ex.next_seq <> p_expected
       OR NOT (ex.state = 'running' OR (p_task AND ex.state = 'suspended')) THEN
        RETURN QUERY SELECT false, n, ex.state, ex.next_seq, p_at, NULL::bigint[], NULL::text[],
                            NULL::uuid[], NULL::int[], NULL::int[], NULL::uuid[],
                            NULL::timestamptz[], NULL::timestamptz[];
        RETURN;
    END IF;
    IF cardinality(p_signal_ids) > 0 THEN
        -- Only a pass commit consumes a signal, and it holds the execution row.
        SELECT array_agg(u.id ORDER BY u.id) INTO lost
        FROM (SELECT DISTINCT id FROM unnest(p_signal_ids) AS id) u
        WHERE NOT EXISTS (
            SELECT 1 FROM azync_workflow_signals s
            WHERE s.id = u.id AND s.workflow_id = p_id AND s.consumed_seq IS NULL);
        IF lost IS NOT NULL THEN
            RETURN QUERY SELECT false, n, ex.state, ex.next_seq, p_at, lost, NULL::text[],
                                NULL::uuid[], NULL::int[], NULL::int[], NULL::uuid[],
                                NULL::timestamptz[], NULL::timestamptz[];
            RETURN;
        END IF;
    END IF;
    st := ex.state;

    -- The jobs that carried the pass.
    checkpoint := p_keep_lease IS NOT NULL AND p_outcome IS NULL AND st = 'running';
    IF checkpoint THEN
        UPDATE azync_jobs a SET lease_until = p_at + p_keep_lease, updated_at = p_at
        WHERE a.id = ANY(p_jobs) AND a.state = 'active';
    ELSE
        WITH acked AS (
            UPDATE azync_jobs a
            SET state = 'succeeded', completed_at = p_at, lease_until = NULL, updated_at = p_at
            FROM unnest(p_jobs, p_errors) AS u(id, error)
            WHERE a.id = u.id AND u.error IS NULL AND a.state = 'active'
            RETURNING a.kind
        )
        SELECT array_agg(ROW('workflow', k.kind, 0, 1, 0, 0)::azync_job_delta) INTO deltas
        FROM acked k;
        IF EXISTS (SELECT 1 FROM unnest(p_errors) AS e WHERE e IS NOT NULL) THEN
            SELECT array_agg(ROW('workflow', d.kind, 0, 0, 1, 0)::azync_job_delta) INTO more
            FROM unnest(p_jobs, p_tokens, p_errors) AS u(id, token, error),
                 LATERAL azync_job_settle(p_at, ARRAY[u.id], ARRAY[u.token], 'dead', u.error,
                                          NULL, false) d
            WHERE u.error IS NOT NULL;
            deltas := deltas || more;
        END IF;
    END IF;

    -- History.
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    SELECT p_id, p_expected + u.ord - 1, u.type, u.payload, p_at
    FROM unnest(p_types, p_payloads) WITH ORDINALITY AS u(type, payload, ord);
    nxt := p_expected + cardinality(p_types);

    -- Operations (azync_workflow_ops_insert: the one insert of operations).
    IF cardinality(p_op_keys) > 0 THEN
        SELECT array_agg(i.task_key) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.id) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.attempt) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.max_attempts) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.lease_token) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.lease_until) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.started_at) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(ROW('workflow', i.kind, 1, 0, 0, 0)::azync_job_delta)
        INTO l_keys, l_ids, l_attempts, l_max, l_tokens, l_until, l_at, more
        FROM azync_workflow_ops_insert(p_at, p_channel, p_id, p_op_kinds, p_op_payloads,
                                       p_op_metas, p_op_keys, p_op_run_ats,
                                       p_op_max_attempts, p_op_routes, p_local_keys,
                                       p_local_lease, p_local_budget) i;
        deltas := deltas || more;
    END IF;

    -- Children: started with their first workflow task; an id another
    -- execution holds is answered in this history (ChildFailed events, or one
    -- ChildrenNotStarted record after the terminal event when the pass ends
    -- the run: its code never sees them).
    IF cardinality(p_child_ids) > 0 THEN
        WITH req AS (
            SELECT u.*
            FROM unnest(p_child_seqs, p_child_ids) WITH ORDINALITY AS u(seq, id, ord)
        ), ins AS MATERIALIZED (
            SELECT c.id FROM azync_workflow_children_start(
                p_at, p_channel, p_id, p_run, p_child_seqs, p_child_ids, p_child_names,
                p_child_versions, p_child_inputs, p_child_policies, p_child_carriers,
                p_child_routes) AS c(id)
        ), taken AS (
            SELECT r.seq, r.id, r.ord FROM req r
            LEFT JOIN azync_workflow_executions x ON x.id = r.id
            WHERE r.id NOT IN (SELECT id FROM ins)
              AND NOT coalesce(x.parent_id = p_id AND x.parent_run_id = p_run
                               AND x.parent_seq = r.seq, false)
        )
        SELECT (SELECT count(*) FROM ins) AS tasks,
               array_agg(format(
                   '{"started_seq":%s,"workflow_id":%s,"error_type":"WorkflowAlreadyStarted",'
                   '"message":%s}',
                   k.seq, to_json(k.id::text),
                   to_json('workflow id ' || k.id || ' is already used by another execution'))
                   ORDER BY k.ord) AS taken
        INTO kids
        FROM taken k;
        IF kids.tasks > 0 THEN
            deltas := deltas || ROW('workflow', '$wft', kids.tasks, 0, 0, 0)::azync_job_delta;
        END IF;
        IF kids.taken IS NOT NULL THEN
            INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
            SELECT p_id, nxt + u.ord - 1, u.type, convert_to(u.payload, 'UTF8'), p_at
            FROM unnest(
                CASE WHEN ends THEN ARRAY['ChildrenNotStarted']
                     ELSE array_fill('ChildFailed'::text, ARRAY[cardinality(kids.taken)]) END,
                CASE WHEN ends
                     THEN ARRAY['{"type":"ChildrenNotStarted","children":['
                                || array_to_string(kids.taken, ',') || ']}']
                     ELSE ARRAY(SELECT '{"type":"ChildFailed","state":"failed",'
                                       || substr(c, 2)
                                FROM unnest(kids.taken) WITH ORDINALITY AS c(c, o)
                                ORDER BY o) END
            ) WITH ORDINALITY AS u(type, payload, ord);
            appended := CASE WHEN ends THEN 1 ELSE cardinality(kids.taken) END;
            nxt := nxt + appended;
        END IF;
    END IF;
    IF cardinality(p_child_signal_ids) > 0 OR cardinality(p_child_cancels) > 0 THEN
        -- Children signalled or asked to cancel: each live one locked in id
        -- order (as signal_workflow locks one), the signals buffered
        -- (deduplicated by (name, message id)), the cancel requests recorded,
        -- and the workflow task of a running child either changed made due.
        WITH live AS (
            SELECT e.id, e.state FROM azync_workflow_executions e
            WHERE e.id = ANY(p_child_signal_ids || p_child_cancels)
              AND e.state IN ('running', 'suspended')
            ORDER BY e.id
            FOR NO KEY UPDATE
        ), sig AS (
            INSERT INTO azync_workflow_signals (workflow_id, name, message_id, payload,
                                                created_at)
            SELECT u.id, u.name, u.message_id, u.payload, p_at
            FROM unnest(p_child_signal_ids, p_child_signal_names, p_child_signal_payloads,
                        p_child_signal_message_ids) WITH ORDINALITY
                 AS u(id, name, payload, message_id, ord)
            JOIN live l ON l.id = u.id
            ORDER BY u.ord
            ON CONFLICT DO NOTHING
            RETURNING workflow_id
        ), req AS (
            UPDATE azync_workflow_executions e
            SET cancel_requested = true, updated_at = p_at
            FROM live l
            WHERE e.id = l.id AND l.id = ANY(p_child_cancels)
            RETURNING e.id
        ), wake AS (
            SELECT azync_workflow_wake_task(l.id, p_at, p_channel)
            FROM live l
            WHERE l.state = 'running'
              AND (l.id IN (SELECT workflow_id FROM sig) OR l.id IN (SELECT id FROM req))
        )
        SELECT count(*) INTO w FROM wake;
    END IF;

    UPDATE azync_workflow_executions e
    SET next_seq = nxt, updated_at = p_at, awaited_signals = coalesce(p_awaited, e.awaited_signals)
    WHERE e.id = p_id;

    -- Timers, signals, update outcomes.
    IF cardinality(p_timer_seqs) > 0 THEN
        INSERT INTO azync_workflow_timers (workflow_id, seq, fire_at)
        SELECT p_id, u.seq, p_at + u.delay
        FROM unnest(p_timer_seqs, p_timer_delays) AS u(seq, delay)
        ON CONFLICT DO NOTHING;
    END IF;
    IF cardinality(p_fired) > 0 THEN
        UPDATE azync_workflow_timers tm SET fired_at = p_at
        WHERE tm.workflow_id = p_id AND tm.seq = ANY(p_fired) AND tm.fired_at IS NULL;
    END IF;
    IF cardinality(p_signal_ids) > 0 THEN
        UPDATE azync_workflow_signals s SET consumed_seq = u.seq
        FROM unnest(p_signal_ids, p_signal_seqs) AS u(id, seq)
        WHERE s.id = u.id AND s.workflow_id = p_id AND s.consumed_seq IS NULL;
    END IF;
    IF cardinality(p_update_ids) > 0 THEN
        INSERT INTO azync_workflow_updates (workflow_id, update_id, name, state, result,
                                            error_type, message, created_at)
        SELECT p_id, u.id, u.name, u.state, u.result, u.error_type, u.message, p_at
        FROM unnest(p_update_ids, p_update_names, p_update_states, p_update_results,
                    p_update_error_types, p_update_messages)
             AS u(id, name, state, result, error_type, message)
        ON CONFLICT DO NOTHING;
        PERFORM azync_wake(p_channel, 'workflow.update:' || p_id::text);
    END IF;

    -- The outcome: the one terminal transition, continue-as-new, or suspend.
    IF p_outcome IN ('complete', 'fail', 'cancelled') THEN
        st := CASE p_outcome WHEN 'complete' THEN 'succeeded' WHEN 'fail' THEN 'failed'
                             ELSE 'cancelled' END;
        PERFORM azync_workflow_finish(p_id, st, p_result, p_reason, p_at, p_channel);
    ELSIF p_outcome = 'continue' THEN
        PERFORM azync_workflow_continue(p_id, p_result, p_new_run, p_cancel_seen, p_at,
                                        p_channel);
    ELSIF p_outcome = 'suspend' THEN
        UPDATE azync_workflow_executions e
        SET state = 'suspended', suspend_reason = p_reason, suspend_seq = p_suspend_seq,
            suspend_operation_id = NULL, updated_at = p_at
        WHERE e.id = p_id AND e.state = 'running';
        st := 'suspended';
    END IF;

    -- The next workflow task, then the counters (the commit's one counter write).
    IF st = 'running' AND NOT checkpoint THEN
        IF p_next_now OR appended > 0 OR p_outcome = 'continue' THEN
            want := p_at;
        ELSE
            want := least(p_next_at,
                          (SELECT min(tm.fire_at) FROM azync_workflow_timers tm
                           WHERE tm.workflow_id = p_id AND tm.fired_at IS NULL),
                          CASE WHEN p_signals_wake AND EXISTS (
                              SELECT 1 FROM azync_workflow_signals s
                              WHERE s.workflow_id = p_id AND s.consumed_seq IS NULL)
                          THEN p_at END);
        END IF;
        IF want IS NOT NULL THEN
            SELECT * INTO t FROM azync_schedule_workflow_task(p_id, '$wft', want, p_at, p_channel);
            IF t.inserted THEN
                deltas := deltas || ROW('workflow', t.kind, 1, 0, 0, 0)::azync_job_delta;
            END IF;
        END IF;
    END IF;
    PERFORM azync_job_count(p_at, deltas);
    RETURN QUERY SELECT true, n, st, nxt, p_at, NULL::bigint[], l_keys, l_ids, l_attempts, l_max,
                        l_tokens, l_until, l_at;
END
$function$;
