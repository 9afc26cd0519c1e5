-- Composing workflows: child executions (parent link, parent-close policy,
-- outcome delivered to the parent) and continue-as-new (a chain of runs under
-- one workflow id).

-- run_id: the current run of the execution (NULL = the first run, whose run
-- id is the execution id). run_no counts runs from 1; run_started_at is when
-- the current run began (NULL = created_at). A child records its parent's id,
-- the parent RUN that started it, the seq of its ChildStarted event there and
-- its parent-close policy ('terminate', 'request_cancel', 'abandon').
ALTER TABLE azync_workflow_executions
    ADD COLUMN run_id uuid,
    ADD COLUMN run_no int NOT NULL DEFAULT 1,
    ADD COLUMN run_started_at timestamptz,
    ADD COLUMN parent_id uuid,
    ADD COLUMN parent_run_id uuid,
    ADD COLUMN parent_seq bigint,
    ADD COLUMN parent_close_policy text NOT NULL DEFAULT '';

-- The live children of a parent run (parent-close policy, listing).
CREATE INDEX azync_workflow_executions_parent ON azync_workflow_executions (parent_id, parent_run_id)
    WHERE parent_id IS NOT NULL;

-- Earlier runs of an execution that continued as new, and their histories
-- (moved out of azync_workflow_history in the continue-as-new transaction).
CREATE TABLE azync_workflow_runs (
    workflow_id  uuid NOT NULL REFERENCES azync_workflow_executions (id) ON DELETE CASCADE,
    run_no       int NOT NULL,
    run_id       uuid NOT NULL,
    input        bytea NOT NULL,
    started_at   timestamptz NOT NULL,
    ended_at     timestamptz NOT NULL,
    events       bigint NOT NULL,
    PRIMARY KEY (workflow_id, run_no)
);

CREATE TABLE azync_workflow_run_history (
    workflow_id  uuid NOT NULL,
    run_no       int NOT NULL,
    seq          bigint NOT NULL,
    type         text NOT NULL,
    payload      bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (workflow_id, run_no, seq),
    FOREIGN KEY (workflow_id, run_no) REFERENCES azync_workflow_runs ON DELETE CASCADE
);

-- Make the execution's one runnable workflow task due now (insert it, or
-- move an existing one to now) and wake a worker.
CREATE FUNCTION azync_workflow_wake_task(p_id uuid, p_at timestamptz, p_channel text)
RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO azync_jobs AS j (id, source, kind, state, run_at, run_id, task_key,
                                 enqueued_at, updated_at)
    VALUES (gen_random_uuid(), 'workflow', '$wft', 'pending', p_at, p_id, '$wft', p_at, p_at)
    ON CONFLICT (run_id)
        WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled')
        DO UPDATE SET run_at = least(j.run_at, EXCLUDED.run_at), state = 'pending',
                      updated_at = EXCLUDED.updated_at;
    PERFORM pg_notify(p_channel, 'workflow:$wft');
END
$$;

-- Apply the parent-close policy of every live child started by run p_run of
-- execution p_id (the parent run just ended: finished, or continued as new):
-- 'terminate' ends the child now (WorkflowTerminated appended, its live jobs
-- cancelled with their lease tokens cleared, timers retired, then the shared
-- terminal transition, which closes ITS children in turn); 'request_cancel'
-- records a cancel request and wakes the child; 'abandon' leaves it running.
-- Children are taken in id order (a fixed lock order between two closers).
CREATE FUNCTION azync_workflow_close_children(
    p_id uuid, p_run uuid, p_at timestamptz, p_channel text
) RETURNS int
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
$$;

-- A child's outcome, delivered to the parent run that started it while that
-- run is live: ChildCompleted (the result bytes embedded as they are) or
-- ChildFailed (error type and message; a failure reason 'Type: message' is
-- split), appended at the parent's next seq, and the parent's workflow task
-- made due when it is running. Nothing when the parent run is gone.
CREATE FUNCTION azync_workflow_notify_parent(
    p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamptz, p_channel text
) RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    ch record;
    par record;
    head text;
    etype text;
    emsg text;
    body bytea;
BEGIN
    SELECT e.parent_id, e.parent_run_id, e.parent_seq INTO ch
    FROM azync_workflow_executions e WHERE e.id = p_id;
    IF ch.parent_id IS NULL THEN
        RETURN;
    END IF;
    SELECT e.next_seq, e.state INTO par FROM azync_workflow_executions e
    WHERE e.id = ch.parent_id AND coalesce(e.run_id, e.id) = ch.parent_run_id
      AND e.state IN ('running', 'suspended')
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_state = 'succeeded' THEN
        body := convert_to('{"type":"ChildCompleted","started_seq":' || ch.parent_seq
                           || ',"workflow_id":"' || p_id::text || '","result":', 'UTF8')
                || coalesce(p_result, convert_to('null', 'UTF8')) || convert_to('}', 'UTF8');
        head := 'ChildCompleted';
    ELSE
        head := substring(p_reason FROM '^([A-Za-z_][A-Za-z0-9_.]*): ');
        IF p_state = 'failed' AND head IS NOT NULL THEN
            etype := head;
            emsg := substring(p_reason FROM char_length(head) + 3);
        ELSE
            etype := CASE p_state WHEN 'cancelled' THEN 'WorkflowCancelled'
                                  WHEN 'terminated' THEN 'WorkflowTerminated'
                                  ELSE 'WorkflowFailed' END;
            emsg := p_reason;
        END IF;
        body := convert_to(jsonb_build_object('type', 'ChildFailed', 'started_seq', ch.parent_seq,
                                              'workflow_id', p_id, 'state', p_state,
                                              'error_type', etype, 'message', emsg)::text,
                           'UTF8');
        head := 'ChildFailed';
    END IF;
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    VALUES (ch.parent_id, par.next_seq, head, body, p_at);
    UPDATE azync_workflow_executions
    SET next_seq = par.next_seq + 1, updated_at = p_at WHERE id = ch.parent_id;
    IF par.state = 'running' THEN
        PERFORM azync_workflow_wake_task(ch.parent_id, p_at, p_channel);
    END IF;
END
$$;

-- Every terminal transition already goes through azync_workflow_finish
-- (migration 0004); it now also closes the run's children and reports to the
-- parent, in the same transaction. The 0004 body is kept under a new name and
-- wrapped, so the signals bookkeeping stays in one place.
ALTER FUNCTION azync_workflow_finish(uuid, text, bytea, text, timestamptz, text)
    RENAME TO azync_workflow_finish_run;

CREATE FUNCTION azync_workflow_finish(
    p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamptz, p_channel text
) RETURNS TABLE (retired bigint, undelivered int)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM azync_workflow_finish_run(p_id, p_state, p_result, p_reason, p_at,
                                                   p_channel);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    PERFORM azync_workflow_close_children(
        p_id, (SELECT coalesce(e.run_id, e.id) FROM azync_workflow_executions e WHERE e.id = p_id),
        p_at, p_channel);
    PERFORM azync_workflow_notify_parent(p_id, p_state, p_result, p_reason, p_at, p_channel);
    RETURN QUERY SELECT r.retired, r.undelivered;
END
$$;

-- Continue-as-new: the current run of p_id (its history already holds the
-- WorkflowContinuedAsNew event) ends and a fresh run starts in place, in the
-- caller's transaction (the execution row is locked by the pass's fence):
-- the run's children get their parent-close policy, the run and its history
-- are archived, its live operations are cancelled (lease tokens cleared) and
-- its timers dropped, and the row restarts at seq 1 with the new input and
-- run id. Signals not consumed by the old run stay buffered for the new one.
-- A cancel request the old run already saw (p_cancel_seen) is cleared.
CREATE FUNCTION azync_workflow_continue(
    p_id uuid, p_input bytea, p_new_run uuid, p_cancel_seen boolean, p_at timestamptz,
    p_channel text
) RETURNS int
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
    UPDATE azync_jobs
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'its workflow run continued as new', completed_at = p_at, updated_at = p_at
    WHERE run_id = p_id AND source = 'workflow' AND task_key <> '$wft'
      AND state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain');
    UPDATE azync_workflow_executions
    SET run_id = p_new_run, run_no = ex.run_no + 1, run_started_at = p_at, input = p_input,
        next_seq = 1, awaited_signals = '{}', updated_at = p_at,
        cancel_requested = cancel_requested AND NOT p_cancel_seen
    WHERE id = p_id;
    RETURN ex.run_no + 1;
END
$$;
