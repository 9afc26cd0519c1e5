-- Every terminal transition of a workflow execution goes through ONE function,
-- azync_workflow_finish, which also accounts for signals that were accepted
-- but never consumed; and a suspended execution records what it concerns.

-- Why a suspended execution is suspended, beyond suspend_reason: the history
-- seq the suspension concerns (where replay disagreed; the OperationUncertain
-- event of an uncertain operation) and the operation job it concerns.
ALTER TABLE azync_workflow_executions
    ADD COLUMN suspend_seq bigint,
    ADD COLUMN suspend_operation_id uuid,
    -- signals accepted but never consumed by the code, recorded at completion
    ADD COLUMN signals_undelivered int NOT NULL DEFAULT 0;

-- azync_workflow_signals.consumed_seq now points at the SignalReceived event
-- that consumed the signal, or at the SignalsUndelivered event that recorded
-- it as never delivered when its execution finished.

-- The ledger fan-out of one event: the event row, one pending delivery job
-- per subscriber registered for its type (stats counted, workers woken on
-- commit). The one home of publishing; the event_publish query calls it.
CREATE FUNCTION azync_publish_event(
    p_id uuid, p_type text, p_aggregate_type text, p_aggregate_id text, p_version bigint,
    p_occurred_at timestamptz, p_payload bytea, p_meta jsonb, p_channel text,
    p_at timestamptz
) RETURNS bigint
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    delivered bigint;
BEGIN
    INSERT INTO azync_events (id, type, aggregate_type, aggregate_id, version, occurred_at,
                              payload, meta, created_at)
    VALUES (p_id, p_type, p_aggregate_type, p_aggregate_id, p_version, p_occurred_at,
            p_payload, p_meta, p_at);
    WITH ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, run_at, max_attempts,
                                max_attempts_explicit, event_id, enqueued_at, updated_at)
        SELECT gen_random_uuid(), 'event', s.name, 'pending', p_at, s.max_attempts,
               s.max_attempts > 0, p_id, p_at, p_at
        FROM azync_subscribers s
        WHERE s.event_type = p_type
        RETURNING kind
    ), stat AS (
        INSERT INTO azync_job_stats (source, kind, day, shard, enqueued)
        SELECT 'event', kind, (p_at AT TIME ZONE 'UTC')::date, (random() * 7)::int, count(*)
        FROM ins GROUP BY kind
        ON CONFLICT (source, kind, day, shard)
            DO UPDATE SET enqueued = azync_job_stats.enqueued + EXCLUDED.enqueued
    ), wake AS (
        SELECT pg_notify(p_channel, 'event:' || kind) FROM ins
    )
    SELECT count(*) INTO delivered FROM ins
    WHERE (SELECT count(*) FROM wake) >= 0;
    RETURN delivered;
END
$$;

-- The terminal transition of a live (running or suspended) execution, for
-- every verb that ends one (a pass's outcome, complete/fail, cancel of a
-- suspended run, terminate): state, result and reason set, runnable tasks and
-- operations cancelled, signals never consumed recorded, waiters notified.
-- Returns no row when the execution is missing or already terminal.
--
-- The execution row is locked FIRST, in its own statement. signal_workflow
-- locks that row before it checks the state and inserts, and holds the lock
-- until it commits, so under READ COMMITTED (each later statement here takes
-- a fresh snapshot) this function sees every signal accepted before the
-- completion, and every signal racing it waits and then reads "finished".
-- An acknowledged signal is therefore either consumed by a pass or recorded
-- here, never lost: unconsumed signals get ONE SignalsUndelivered history
-- event (after the outcome's events; ids, names, message ids), their
-- consumed_seq set to it, the count on the execution row, and ONE
-- azync.workflow.signals_undelivered ledger event, all in this transaction.
CREATE FUNCTION azync_workflow_finish(
    p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamptz, p_channel text
) RETURNS TABLE (retired bigint, undelivered int)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
    PERFORM pg_notify(p_channel, 'workflow.done:' || p_id::text);
    RETURN QUERY SELECT gone, n;
END
$$;
