-- Search attributes: typed values an execution carries for listing
-- (``client.list(where=...)``, ``azync-flow workflows list --where``). They
-- are one jsonb map per execution: a keyword is a JSON string, an int or a
-- float a JSON number, a bool a JSON boolean, a datetime the object
-- {"$datetime": "<UTC ISO-8601, microseconds, Z>"} (fixed width, so string
-- order is time order, and never equal to a keyword). A filter is one
-- jsonpath predicate (@@); the jsonb_path_ops GIN index serves its equality
-- parts, a range alone walks the rows (measured in bench/).
ALTER TABLE azync_workflow_executions ADD COLUMN search_attributes jsonb NOT NULL DEFAULT '{}';
CREATE INDEX azync_workflow_executions_search ON azync_workflow_executions
    USING gin (search_attributes jsonb_path_ops);

-- A start sets the map; each SearchAttributesUpserted event merges its
-- "attributes" into it (a JSON null removes the name) in the transaction that
-- appends the event, whichever statement appends it (a pass commit, the hot
-- path). Only that event type fires the function (the WHEN clause is checked
-- without calling it), so other history inserts pay nothing but the check.
CREATE FUNCTION azync_workflow_search_upsert() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    attrs jsonb := convert_from(NEW.payload, 'UTF8')::jsonb -> 'attributes';
BEGIN
    UPDATE azync_workflow_executions
    SET search_attributes = (search_attributes || jsonb_strip_nulls(attrs))
        - ARRAY(SELECT k FROM jsonb_each(attrs) AS a(k, v) WHERE v = 'null'::jsonb)
    WHERE id = NEW.workflow_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER azync_workflow_history_search_upsert
    AFTER INSERT ON azync_workflow_history
    FOR EACH ROW WHEN (NEW.type = 'SearchAttributesUpserted')
    EXECUTE FUNCTION azync_workflow_search_upsert();

-- Reset: a new run of the same execution that keeps the history of the
-- current run up to a point and continues from there with the current code
-- (azync_workflow_reset). The run it replaces is archived as continue-as-new
-- archives a run (azync_workflow_runs, azync_workflow_run_history), marked
-- 'reset' with the point, the reason and the state it was in; the execution
-- row names the run it was reset from (both directions of the link).
ALTER TABLE azync_workflow_runs
    ADD COLUMN ended_as text NOT NULL DEFAULT 'continued_as_new',
    ADD COLUMN reset_seq bigint,
    ADD COLUMN reset_reason text NOT NULL DEFAULT '',
    ADD COLUMN state_at_reset text NOT NULL DEFAULT '';
ALTER TABLE azync_workflow_executions
    ADD COLUMN reset_from_run int,
    ADD COLUMN reset_seq bigint,
    ADD COLUMN reset_reason text NOT NULL DEFAULT '';

-- In one transaction, after the caller locked the execution's live jobs
-- (NOWAIT, as terminate) and with p_expected = the next_seq the caller
-- planned from (else nothing is written: ok = false):
--   * the current run and its whole history are archived (ended_as 'reset');
--   * history past p_keep is deleted (the new run keeps seq 1..p_keep);
--   * every live job of the execution (its workflow task, its operations) is
--     cancelled with its lease token cleared, so a worker still holding one
--     loses its fence and writes nothing;
--   * the operations the kept history schedules without an outcome
--     (p_rerun: their execution keys) are enqueued again, copied from their
--     last job (same kind, payload, meta, attempts budget, queue, priority;
--     meta "reset_run" names the new run, so a worker caching the old run's
--     instance never folds their outcome into it);
--   * timers: those the kept history started and neither fired nor
--     cancelled (p_timers) are unfired (re-created from their TimerStarted
--     event if gone), every other timer row is dropped;
--   * signals the old run consumed after the point are buffered again, in
--     their original order (the new run's code receives them when it waits);
--   * children of the old run still live get their parent-close policy (the
--     caller refuses a point that keeps a child start without its outcome);
--   * the row becomes a running new run (run_no + 1, p_new_run, result,
--     reasons, cancel request and suspension cleared) with a workflow task due now.
CREATE FUNCTION azync_workflow_reset(
    p_at timestamptz, p_channel text, p_id uuid, p_expected bigint, p_keep bigint,
    p_new_run uuid, p_reason text, p_rerun text[], p_timers bigint[]
) RETURNS TABLE (ok boolean, state text, run_no int, next_seq bigint, rerun int,
                 redelivered int, at timestamptz)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
$$;
