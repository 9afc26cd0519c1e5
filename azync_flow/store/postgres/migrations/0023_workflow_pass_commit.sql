-- Every pass commit of a workflow is ONE statement, whatever the pass writes:
-- azync_workflow_pass_commit. It replaces the two partial one-statement forms
-- (the blocked-pass CTE and azync_workflow_pass_finish) and the multi-statement
-- transaction that wrote the other passes, so each step of a commit exists once.
-- Each step is its own statement inside the function, in the order the
-- transaction ran them: fence (the jobs that carried the pass, locked in id
-- order, THEN the execution row), settle those jobs, history, operations,
-- children, timers, signals, update outcomes, the outcome, the next workflow
-- task, and LAST the counter deltas of the commit (one insert per kind).
--
-- Arguments (called with named arguments, see workflow_pass_commit):
--   p_at / p_channel: the clock and the NOTIFY channel.
--   p_id, p_run: the execution and its current run (the parent run of the
--     children the pass starts).
--   p_jobs / p_tokens: the jobs that carried the pass, fenced by their lease
--     tokens: its workflow task (p_task), or the operations whose outcomes are
--     among the events; none for a first pass inside its start's transaction.
--     p_errors: per job, NULL = ack it, else dead-letter it with that error.
--   p_expected: the next_seq the pass replayed up to; p_types / p_payloads:
--     the events appended from there; p_awaited: the awaited signal names
--     (NULL = unchanged).
--   p_op_*: operations to insert (deduplicated by execution key among the
--     run's live operations); those keyed in p_local_keys and due now are
--     inserted leased (p_local_lease, p_local_budget when the call set none).
--   p_timer_seqs / p_timer_delays: timers to start; p_fired: timers fired.
--   p_signal_ids / p_signal_seqs: buffered signals consumed.
--   p_update_*: update outcomes to keep (first outcome of an id wins).
--   p_child_*: children to start; p_child_signal_*: signals to buffer for
--     children; p_child_cancels: children to request cancellation of.
--   p_outcome: NULL, 'complete' (p_result), 'fail' / 'cancelled' (p_reason),
--     'suspend' (p_reason, p_suspend_seq) or 'continue' (p_result = the new
--     input, p_new_run, p_cancel_seen).
--   p_next_at / p_next_now / p_signals_wake: the next workflow task of a
--     running execution is scheduled now when p_next_now (or the commit
--     appended events of its own, or continued as new), else at the earliest
--     of p_next_at, the earliest unfired timer and (p_signals_wake) now when a
--     signal is buffered unconsumed; none when all are NULL.
--   p_keep_lease: a checkpoint when the execution stays running: the workflow
--     task is not acked but its lease renewed to p_at + p_keep_lease, and no
--     next task is scheduled.
--
-- Result, one row (none: the execution does not exist): ok = false when
-- nothing was written, because a job lost its fence (fenced <
-- cardinality(p_jobs)), next_seq is not p_expected, the execution is not
-- running (a pass of a workflow task may also commit while it is suspended), or
-- a signal to consume is unknown or already consumed (missing, its ids).
-- next_seq: after the commit; leased_*: the operations inserted leased, by
-- execution key.
CREATE FUNCTION azync_workflow_pass_commit(
    p_at timestamptz, p_channel text, p_id uuid, p_run uuid,
    p_jobs uuid[], p_tokens uuid[], p_task boolean, p_errors text[],
    p_expected bigint, p_types text[], p_payloads bytea[], p_awaited text[],
    p_op_kinds text[], p_op_payloads bytea[], p_op_metas text[], p_op_keys text[],
    p_op_run_ats timestamptz[], p_op_max_attempts int[],
    p_local_keys text[], p_local_lease interval, p_local_budget int,
    p_timer_seqs bigint[], p_timer_delays interval[], p_fired bigint[],
    p_signal_ids bigint[], p_signal_seqs bigint[],
    p_update_ids text[], p_update_names text[], p_update_states text[],
    p_update_results bytea[], p_update_error_types text[], p_update_messages text[],
    p_child_seqs bigint[], p_child_ids uuid[], p_child_names text[], p_child_versions text[],
    p_child_inputs bytea[], p_child_policies text[], p_child_carriers text[],
    p_child_signal_ids uuid[], p_child_signal_names text[], p_child_signal_payloads bytea[],
    p_child_signal_message_ids text[], p_child_cancels uuid[],
    p_outcome text, p_result bytea, p_reason text, p_suspend_seq bigint,
    p_new_run uuid, p_cancel_seen boolean,
    p_next_at timestamptz, p_next_now boolean, p_signals_wake boolean, p_keep_lease interval
) RETURNS TABLE (ok boolean, fenced bigint, state text, next_seq bigint, at timestamptz,
                 missing bigint[], leased_keys text[], leased_ids uuid[],
                 leased_attempts int[], leased_max_attempts int[], leased_tokens uuid[],
                 leased_until timestamptz[], leased_at timestamptz[])
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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

    -- Operations.
    IF cardinality(p_op_keys) > 0 THEN
        WITH req AS (
            SELECT u.*, coalesce(u.run_at, p_at) AS due,
                   (u.run_at IS NULL AND u.key = ANY(coalesce(p_local_keys, '{}'))) AS leased
            FROM unnest(p_op_kinds, p_op_payloads, p_op_metas, p_op_keys, p_op_run_ats,
                        p_op_max_attempts)
                 WITH ORDINALITY AS u(kind, payload, meta, key, run_at, max_attempts, ord)
        ), existing AS (
            SELECT DISTINCT j.task_key FROM azync_jobs j
            WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_op_keys)
              AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
        ), ins AS (
            INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at,
                                    max_attempts, max_attempts_explicit, run_id, task_key,
                                    enqueued_at, updated_at, attempt, lease_token,
                                    lease_until, started_at)
            SELECT gen_random_uuid(), 'workflow', r.kind,
                   CASE WHEN r.leased THEN 'active' WHEN r.due > p_at THEN 'scheduled'
                        ELSE 'pending' END,
                   r.payload, r.meta::jsonb, r.due,
                   CASE WHEN r.leased AND r.max_attempts <= 0 THEN p_local_budget
                        ELSE r.max_attempts END,
                   r.max_attempts > 0, p_id, r.key, p_at, p_at,
                   CASE WHEN r.leased THEN 1 ELSE 0 END,
                   CASE WHEN r.leased THEN gen_random_uuid() END,
                   CASE WHEN r.leased THEN p_at + p_local_lease END,
                   CASE WHEN r.leased THEN p_at END
            FROM req r
            WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.task_key = r.key)
            ORDER BY r.ord
            RETURNING id, task_key, kind, state, attempt, max_attempts, lease_token,
                      lease_until, started_at
        ), wake AS (
            SELECT pg_notify(p_channel, 'workflow:' || k.kind)
            FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
        )
        SELECT array_agg(i.task_key) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.id) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.attempt) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.max_attempts) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.lease_token) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.lease_until) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(i.started_at) FILTER (WHERE i.lease_token IS NOT NULL),
               array_agg(ROW('workflow', i.kind, 1, 0, 0, 0)::azync_job_delta)
        INTO l_keys, l_ids, l_attempts, l_max, l_tokens, l_until, l_at, more
        FROM ins i
        WHERE (SELECT count(*) FROM wake) >= 0;
        deltas := deltas || more;
    END IF;

    -- Children: started with their first workflow task; an id another
    -- execution holds is answered in this history (ChildFailed events, or one
    -- ChildrenNotStarted record after the terminal event when the pass ends
    -- the run: its code never sees them).
    IF cardinality(p_child_ids) > 0 THEN
        WITH req AS (
            SELECT u.*
            FROM unnest(p_child_seqs, p_child_ids, p_child_names, p_child_versions,
                        p_child_inputs, p_child_policies, p_child_carriers) WITH ORDINALITY
                 AS u(seq, id, name, version, input, policy, carrier, ord)
        ), ins AS (
            INSERT INTO azync_workflow_executions (id, name, version, state, input,
                                                   trace_context, parent_id, parent_run_id,
                                                   parent_seq, parent_close_policy,
                                                   created_at, updated_at)
            SELECT r.id, r.name, r.version, 'running', r.input, r.carrier::jsonb, p_id, p_run,
                   r.seq, r.policy, p_at, p_at
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
            SELECT pg_notify(p_channel, 'workflow:$wft') FROM (SELECT 1 FROM task LIMIT 1) k
        ), taken AS (
            SELECT r.seq, r.id, r.ord FROM req r
            LEFT JOIN azync_workflow_executions x ON x.id = r.id
            WHERE r.id NOT IN (SELECT id FROM ins)
              AND NOT coalesce(x.parent_id = p_id AND x.parent_run_id = p_run
                               AND x.parent_seq = r.seq, false)
        )
        SELECT (SELECT count(*) FROM task) AS tasks, (SELECT count(*) FROM wake) AS woken,
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
        PERFORM pg_notify(p_channel, 'workflow.update:' || p_id::text);
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
$$;

DROP FUNCTION azync_workflow_pass_finish(
    uuid, uuid[], uuid[], boolean, bigint, text[], bytea[], text[], text, bytea, text,
    timestamptz, text);
