-- A locally dispatched activity attempt is not a job row while it runs.
--
-- The pass commit that leases an operation to its own worker used to insert
-- it into azync_jobs as active and the next pass updated it to succeeded: two
-- writes into the table every source shares (22 indexes, foreign keys,
-- triggers, never a HOT update). A local attempt no limit or deadline tracks
-- is now a row of azync_workflow_local_attempts (its key, its lease, the
-- fencing token) with only the indexes its own work needs: by id, by run and
-- by lease expiry. The pass that records its success deletes that row and
-- inserts the operation's job row once, already succeeded, so everything
-- that reads finished operations reads them where it always did.
--
-- Every other path first hands the attempt back to azync_jobs as it stands
-- (active, same id, token and lease), then runs unchanged: a failure or a
-- kept lease in the pass commit, any settle or lease renewal by the worker
-- (the store retries a fenced statement after a hand back), the expiry sweep
-- (an attempt whose lease ran out), and continue-as-new, reset, terminate and
-- closing children, which cancel a run's operations.
CREATE TABLE azync_workflow_local_attempts (
    id uuid PRIMARY KEY,
    run_id uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    task_key text NOT NULL,
    kind text NOT NULL,
    payload bytea,
    meta jsonb NOT NULL,
    attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    max_attempts_explicit boolean NOT NULL,
    lease_token uuid NOT NULL,
    lease_until timestamptz NOT NULL,
    task_queue text NOT NULL,
    priority integer NOT NULL,
    started_at timestamptz NOT NULL
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX azync_workflow_local_attempts_run ON azync_workflow_local_attempts (run_id);
CREATE INDEX azync_workflow_local_attempts_expiry
    ON azync_workflow_local_attempts (lease_until);

-- The one move of local attempts into azync_jobs, keeping id, token and
-- lease: as active job rows (a hand back), or as succeeded ones (the pass that
-- records their success). Returns the kind of each row moved (none when
-- another transaction moved them first).
CREATE FUNCTION azync_workflow_local_attempts_move(p_ids uuid[], p_at timestamptz,
                                                   p_succeeded boolean)
RETURNS SETOF text
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $function$
BEGIN
    IF cardinality(p_ids) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY WITH gone AS (
        DELETE FROM azync_workflow_local_attempts l
        WHERE l.id = ANY(p_ids)
        RETURNING l.*
    ), ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                                max_attempts_explicit, run_id, task_key, enqueued_at,
                                updated_at, attempt, lease_token, lease_until, started_at,
                                completed_at, task_queue, priority)
        SELECT g.id, 'workflow', g.kind, CASE WHEN p_succeeded THEN 'succeeded' ELSE 'active' END,
               g.payload, g.meta, g.started_at, g.max_attempts, g.max_attempts_explicit,
               g.run_id, g.task_key, g.started_at, p_at, g.attempt, g.lease_token,
               CASE WHEN NOT p_succeeded THEN g.lease_until END, g.started_at,
               CASE WHEN p_succeeded THEN p_at END, g.task_queue, g.priority
        FROM gone g
        RETURNING azync_jobs.kind
    )
    SELECT i.kind FROM ins i;
END
$function$;

-- The hand back: the named local attempts become active job rows as they
-- stand. Returns how many moved.
CREATE FUNCTION azync_workflow_local_attempts_hand_back(p_ids uuid[], p_at timestamptz)
RETURNS integer
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $function$
BEGIN
    RETURN (SELECT count(*) FROM azync_workflow_local_attempts_move(p_ids, p_at, false));
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
        SELECT j.task_key FROM azync_jobs j
        WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_keys)
          AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
        UNION
        SELECT l.task_key FROM azync_workflow_local_attempts l
        WHERE l.run_id = p_id AND l.task_key = ANY(p_keys)
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
               gen_random_uuid() AS job_id, azync_lease_token() AS token
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
                   AS leased,
               -- a local attempt that no limit or deadline tracks is not a job row
               w.local AND w.limit_key IS NULL
                   AND NOT EXISTS (SELECT 1 FROM azync_limit_scopes sc
                                   WHERE sc.source = 'workflow' AND sc.kind = w.kind)
                   AND NOT (w.meta::jsonb ?| ARRAY['schedule_to_start_s', 'schedule_to_close_s'])
                   AS lean
        FROM wanted w
        ORDER BY w.ord
    ), lean_ins AS (
        INSERT INTO azync_workflow_local_attempts AS l (
            id, run_id, task_key, kind, payload, meta, attempt, max_attempts,
            max_attempts_explicit, lease_token, lease_until, task_queue, priority, started_at)
        SELECT r.job_id, p_id, r.key, r.kind, r.payload, r.meta::jsonb, 1,
               CASE WHEN r.max_attempts <= 0 THEN p_local_budget ELSE r.max_attempts END,
               r.max_attempts > 0, r.token, p_at + p_local_lease, r.task_queue, r.priority, p_at
        FROM req r
        WHERE r.lean
        ORDER BY r.ord
        RETURNING l.task_key, l.id, l.kind, 'active'::text AS state, l.attempt, l.max_attempts,
                  l.lease_token, l.lease_until, l.started_at, l.started_at AS run_at,
                  l.started_at AS enqueued_at
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
        WHERE NOT r.lean
        ORDER BY r.ord
        RETURNING task_key, id, kind, state, attempt, max_attempts, lease_token,
                  lease_until, started_at, run_at, enqueued_at
    ), wake AS (
        SELECT azync_wake(p_channel, 'workflow:' || k.kind)
        FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
    )
    SELECT i.* FROM ins i WHERE (SELECT count(*) FROM wake) >= 0
    UNION ALL
    SELECT l.* FROM lean_ins l;
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
    n_local bigint;
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
    -- Fence: the local attempts, the jobs, THEN the execution row.
    SELECT count(*) INTO n_local FROM (
        SELECT l.id FROM azync_workflow_local_attempts l
        JOIN unnest(p_jobs, p_tokens) AS u(id, token)
          ON l.id = u.id AND l.lease_token = u.token
        WHERE NOT p_task AND l.run_id = p_id
        ORDER BY l.id
        FOR UPDATE OF l
    ) locked_local;
    SELECT n_local + count(*) INTO n FROM (
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
    IF n_local > 0 AND (checkpoint OR EXISTS (SELECT 1 FROM unnest(p_errors) AS e
                                              WHERE e IS NOT NULL)) THEN
        -- kept or failed: the attempts go on as job rows (the rare paths)
        PERFORM azync_workflow_local_attempts_hand_back(p_jobs, p_at);
        n_local := 0;
    END IF;
    IF checkpoint THEN
        UPDATE azync_jobs a SET lease_until = p_at + p_keep_lease, updated_at = p_at
        WHERE a.id = ANY(p_jobs) AND a.state = 'active';
    ELSE
        IF n_local > 0 THEN
            -- a succeeded local attempt becomes its operation's one job row
            SELECT array_agg(ROW('workflow', k, 0, 1, 0, 0)::azync_job_delta) INTO deltas
            FROM azync_workflow_local_attempts_move(p_jobs, p_at, true) AS k;
        END IF;
        WITH acked AS (
            UPDATE azync_jobs a
            SET state = 'succeeded', completed_at = p_at, lease_until = NULL, updated_at = p_at
            FROM unnest(p_jobs, p_errors) AS u(id, error)
            WHERE a.id = u.id AND u.error IS NULL AND a.state = 'active'
            RETURNING a.kind
        )
        SELECT deltas || array_agg(ROW('workflow', k.kind, 0, 1, 0, 0)::azync_job_delta)
        INTO deltas
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

CREATE OR REPLACE FUNCTION azync_workflow_continue(p_id uuid, p_input bytea, p_new_run uuid, p_cancel_seen boolean, p_at timestamp with time zone, p_channel text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    ex record;
BEGIN
    SELECT e.run_id, e.run_no, e.input, e.next_seq, coalesce(e.run_started_at, e.created_at)
        AS started
    INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id AND e.state = 'running'
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    PERFORM azync_workflow_close_children(p_id, coalesce(ex.run_id, p_id), p_at, p_channel);
    INSERT INTO azync_workflow_runs (workflow_id, run_no, run_id, input, started_at, ended_at,
                                     events)
    VALUES (p_id, ex.run_no, coalesce(ex.run_id, p_id), ex.input, ex.started, p_at,
            ex.next_seq - 1);
    INSERT INTO azync_workflow_run_history (workflow_id, run_no, seq, type, payload, created_at)
    SELECT workflow_id, ex.run_no, seq, type, payload, created_at
    FROM azync_workflow_history WHERE workflow_id = p_id;
    DELETE FROM azync_workflow_history WHERE workflow_id = p_id;
    DELETE FROM azync_workflow_timers WHERE workflow_id = p_id;
    PERFORM azync_workflow_local_attempts_hand_back(
        ARRAY(SELECT l.id FROM azync_workflow_local_attempts l WHERE l.run_id = p_id), p_at);
    UPDATE azync_jobs
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'its workflow run continued as new', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow' AND task_key <> '$wft'
      AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
    UPDATE azync_workflow_executions
    SET run_id = p_new_run, run_no = ex.run_no + 1, run_started_at = p_at, input = p_input,
        next_seq = 1, awaited_signals = '{}', updated_at = p_at,
        cancel_requested = cancel_requested AND NOT p_cancel_seen,
        timeout_at = least(created_at + execution_timeout, p_at + run_timeout)
    WHERE id = p_id;
    RETURN ex.run_no + 1;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_close_children(p_id uuid, p_run uuid, p_at timestamp with time zone, p_channel text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
DECLARE
    c record;
    n int := 0;
    why text;
BEGIN
    FOR c IN
        SELECT e.id, e.state, e.next_seq, e.parent_close_policy FROM azync_workflow_executions e
        WHERE e.parent_id = p_id AND e.parent_run_id = p_run
          AND e.state IN ('running', 'suspended') AND e.parent_close_policy <> 'abandon'
        ORDER BY e.id
        FOR NO KEY UPDATE
    LOOP
        n := n + 1;
        IF c.parent_close_policy = 'request_cancel' THEN
            UPDATE azync_workflow_executions
            SET cancel_requested = true, updated_at = p_at WHERE id = c.id;
            IF c.state = 'running' THEN
                PERFORM azync_workflow_wake_task(c.id, p_at, p_channel);
            END IF;
            CONTINUE;
        END IF;
        why := 'parent workflow ' || p_id::text || ' closed (parent-close policy terminate)';
        INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
        VALUES (c.id, c.next_seq, 'WorkflowTerminated',
                convert_to(jsonb_build_object('type', 'WorkflowTerminated', 'reason', why,
                                              'terminated_by', 'parent-close-policy')::text,
                           'UTF8'),
                p_at);
        UPDATE azync_workflow_executions
        SET next_seq = c.next_seq + 1, updated_at = p_at WHERE id = c.id;
        PERFORM azync_workflow_local_attempts_hand_back(
            ARRAY(SELECT l.id FROM azync_workflow_local_attempts l WHERE l.run_id = c.id), p_at);
        UPDATE azync_jobs
        SET state = 'cancelled', lease_token = NULL, lease_until = NULL, last_error = why,
            completed_at = p_at, updated_at = p_at
        WHERE run_id = c.id AND source = 'workflow'
          AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
        UPDATE azync_workflow_timers SET fired_at = p_at
        WHERE workflow_id = c.id AND fired_at IS NULL;
        PERFORM azync_workflow_finish(c.id, 'terminated', NULL, why, p_at, p_channel);
    END LOOP;
    RETURN n;
END
$function$;

CREATE OR REPLACE FUNCTION azync_workflow_reset(p_at timestamp with time zone, p_channel text, p_id uuid, p_expected bigint, p_keep bigint, p_new_run uuid, p_reason text, p_rerun text[], p_timers bigint[])
 RETURNS TABLE(ok boolean, state text, run_no integer, next_seq bigint, rerun integer, redelivered integer, at timestamp with time zone)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
AS $function$
#variable_conflict use_column
DECLARE
    ex record;
    n_ops int;
    n_sig int;
    deltas azync_job_delta[];
BEGIN
    SELECT e.state, e.run_id, e.run_no, e.input, e.next_seq,
           coalesce(e.run_started_at, e.created_at) AS started
    INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF ex.next_seq <> p_expected OR p_keep < 0 OR p_keep >= ex.next_seq THEN
        RETURN QUERY SELECT false, ex.state, ex.run_no, ex.next_seq, 0, 0, p_at;
        RETURN;
    END IF;
    PERFORM azync_workflow_close_children(p_id, coalesce(ex.run_id, p_id), p_at, p_channel);
    INSERT INTO azync_workflow_runs (workflow_id, run_no, run_id, input, started_at, ended_at,
                                     events, ended_as, reset_seq, reset_reason, state_at_reset)
    VALUES (p_id, ex.run_no, coalesce(ex.run_id, p_id), ex.input, ex.started, p_at,
            ex.next_seq - 1, 'reset', p_keep, p_reason, ex.state);
    INSERT INTO azync_workflow_run_history (workflow_id, run_no, seq, type, payload, created_at)
    SELECT workflow_id, ex.run_no, seq, type, payload, created_at
    FROM azync_workflow_history WHERE workflow_id = p_id;
    DELETE FROM azync_workflow_history WHERE workflow_id = p_id AND seq > p_keep;

    PERFORM azync_workflow_local_attempts_hand_back(
        ARRAY(SELECT l.id FROM azync_workflow_local_attempts l WHERE l.run_id = p_id), p_at);
    UPDATE azync_jobs
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'its workflow run was reset', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow'
      AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
    WITH last AS (
        SELECT DISTINCT ON (j.task_key) j.*
        FROM azync_jobs j
        WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_rerun)
        ORDER BY j.task_key, j.enqueued_at DESC, j.id
    ), ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at, max_attempts,
                                max_attempts_explicit, run_id, task_key, enqueued_at,
                                updated_at, task_queue, priority)
        SELECT gen_random_uuid(), 'workflow', l.kind, 'pending', l.payload,
               l.meta || jsonb_build_object('reset_run', p_new_run::text), p_at,
               l.max_attempts, l.max_attempts_explicit, p_id, l.task_key, p_at, p_at,
               l.task_queue, l.priority
        FROM last l
        RETURNING kind
    ), wake AS (
        SELECT pg_notify(p_channel, 'workflow:' || k.kind) FROM (SELECT DISTINCT kind FROM ins) k
    )
    SELECT count(*)::int, array_agg(ROW('workflow', i.kind, 1, 0, 0, 0)::azync_job_delta)
    INTO n_ops, deltas
    FROM ins i WHERE (SELECT count(*) FROM wake) >= 0;

    DELETE FROM azync_workflow_timers t
    WHERE t.workflow_id = p_id AND NOT (t.seq = ANY(p_timers));
    INSERT INTO azync_workflow_timers (workflow_id, seq, fire_at, fired_at)
    SELECT p_id, h.seq,
           h.created_at + ((convert_from(h.payload, 'UTF8')::jsonb ->> 'fire_after_s')::float8
                           * interval '1 second'),
           NULL
    FROM azync_workflow_history h
    WHERE h.workflow_id = p_id AND h.seq = ANY(p_timers) AND h.type = 'TimerStarted'
    ON CONFLICT (workflow_id, seq) DO UPDATE SET fired_at = NULL;

    UPDATE azync_workflow_signals s SET consumed_seq = NULL
    WHERE s.workflow_id = p_id AND s.consumed_seq > p_keep;
    GET DIAGNOSTICS n_sig = ROW_COUNT;

    UPDATE azync_workflow_executions e
    SET state = 'running', run_id = p_new_run, run_no = ex.run_no + 1, run_started_at = p_at,
        next_seq = p_keep + 1, result = NULL, failure_reason = '', suspend_reason = '',
        suspend_seq = NULL, suspend_operation_id = NULL, completed_at = NULL,
        cancel_requested = false, awaited_signals = '{}', signals_undelivered = 0,
        reset_from_run = ex.run_no, reset_seq = p_keep, reset_reason = p_reason,
        updated_at = p_at
    WHERE e.id = p_id;
    PERFORM azync_schedule_workflow_task(p_id, '$wft', p_at, p_at, p_channel);
    deltas := coalesce(deltas, '{}') || ROW('workflow', '$wft', 1, 0, 0, 0)::azync_job_delta;
    PERFORM azync_job_count(p_at, deltas);
    RETURN QUERY SELECT true, 'running'::text, ex.run_no + 1, p_keep + 1, n_ops, n_sig, p_at;
END
$function$;
