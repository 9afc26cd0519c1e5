-- A cancel requested while a pass ran the workflow's code (or while a
-- completion was carried into a pass with cached state) was dropped: the
-- request only sets cancel_requested, which a pass reads when its task is
-- leased, and the pass in flight committed without it, going on to its next
-- step or ending the run. The pass commit now refuses a pass that keeps the
-- run going, completes or fails it without knowing of a cancel that was
-- requested (p_cancel_seen: the pass knows of it; given for every outcome).
-- The worker runs it again with the request, and the code sees CancelledError
-- at its current await. The request updates the execution row this commit
-- locks, so either the commit sees the flag or the request comes after it.
-- A suspending pass (nondeterminism) and continue-as-new (which hands an
-- unseen request to the new run) are not refused.

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
    op record;
    acked record;
BEGIN
    PERFORM set_config('azync.wakes', '', true);  -- this statement's wakes only
    -- Fence: the jobs, THEN the execution row.
    PERFORM FROM azync_jobs j
    WHERE j.id = ANY(p_jobs) AND j.lease_token = p_tokens[array_position(p_jobs, j.id)]
      AND j.state = 'active' AND j.source = 'workflow' AND j.run_id = p_id
      AND (j.task_key = '$wft') = p_task
    ORDER BY j.id
    FOR UPDATE OF j;
    GET DIAGNOSTICS n = ROW_COUNT;
    SELECT e.state, e.next_seq, e.cancel_requested INTO ex FROM azync_workflow_executions e
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
    IF ex.cancel_requested AND p_cancel_seen IS NOT TRUE
       AND (p_outcome IS NULL OR p_outcome IN ('complete', 'fail')) THEN
        -- a cancel requested after the pass loaded its state: refused, so it
        -- runs again with the request instead of going on (or ending) past it
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
        FOR acked IN
            UPDATE azync_jobs a
            SET state = 'succeeded', completed_at = p_at, lease_until = NULL, updated_at = p_at
            WHERE a.id = ANY(p_jobs) AND a.state = 'active'
              AND p_errors[array_position(p_jobs, a.id)] IS NULL
            RETURNING a.kind
        LOOP
            deltas := deltas || ROW('workflow', acked.kind, 0, 1, 0, 0)::azync_job_delta;
        END LOOP;
        IF cardinality(array_remove(p_errors, NULL)) > 0 THEN
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
        FOR op IN
            SELECT * FROM azync_workflow_ops_insert(p_at, p_channel, p_id, p_op_kinds,
                                                    p_op_payloads, p_op_metas, p_op_keys,
                                                    p_op_run_ats, p_op_max_attempts,
                                                    p_op_routes, p_local_keys, p_local_lease,
                                                    p_local_budget)
        LOOP
            deltas := deltas || ROW('workflow', op.kind, 1, 0, 0, 0)::azync_job_delta;
            IF op.lease_token IS NOT NULL THEN
                l_keys := l_keys || op.task_key;
                l_ids := l_ids || op.id;
                l_attempts := l_attempts || op.attempt;
                l_max := l_max || op.max_attempts;
                l_tokens := l_tokens || op.lease_token;
                l_until := l_until || op.lease_until;
                l_at := l_at || op.started_at;
            END IF;
        END LOOP;
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
        ELSIF p_task AND EXISTS (
            SELECT 1 FROM azync_jobs j
            WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = '$wft'
              AND j.state = 'pending') THEN
            -- made due while this pass held the run (a signal): its wake-up came
            -- while leases skipped the run for this task, so wake it again
            PERFORM azync_wake(p_channel, 'workflow:$wft');
        END IF;
    END IF;
    PERFORM azync_job_count(p_at, deltas);
    RETURN QUERY SELECT true, n, st, nxt, p_at, NULL::bigint[], l_keys, l_ids, l_attempts, l_max,
                        l_tokens, l_until, l_at;
END
$function$;
