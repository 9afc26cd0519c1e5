-- Timeouts of workflow executions and of activities, enforced by the
-- leader's maintenance on the database clock (docs/flow-control.md).
--
-- An execution may carry an execution timeout (from its start, across
-- continue-as-new runs) and a run timeout (each run, from the run's start);
-- timeout_at is the earlier of the two deadlines of its current run, and a
-- partial index holds only live executions that have one, so executions
-- without timeouts cost nothing.
ALTER TABLE azync_workflow_executions
    ADD COLUMN execution_timeout interval,
    ADD COLUMN run_timeout interval,
    ADD COLUMN timeout_at timestamptz;
CREATE INDEX azync_workflow_executions_timeout ON azync_workflow_executions (timeout_at)
    WHERE timeout_at IS NOT NULL AND state IN ('running', 'suspended');

-- An operation (activity call) may carry a schedule-to-start deadline (until
-- its first lease: attempt still 0) and a schedule-to-close deadline (until
-- it settles, across every attempt). Each partial index holds only the rows
-- whose deadline can still fire.
ALTER TABLE azync_jobs
    ADD COLUMN start_deadline timestamptz,
    ADD COLUMN close_deadline timestamptz;
CREATE INDEX azync_jobs_start_deadline ON azync_jobs (start_deadline)
    WHERE start_deadline IS NOT NULL AND attempt = 0 AND state IN ('pending', 'scheduled');
CREATE INDEX azync_jobs_close_deadline ON azync_jobs (close_deadline)
    WHERE close_deadline IS NOT NULL
      AND state IN ('pending', 'scheduled', 'active', 'paused');

-- Operations get their deadlines from their meta ({"schedule_to_start_s":
-- "s", "schedule_to_close_s": "s"}, written with the operation), at insert,
-- by a trigger whose WHEN clause lets it fire only for such operations: every
-- other insert runs no trigger code, and azync_workflow_ops_insert is not
-- replaced here. One leased by the committing worker at insert (active) has
-- started: it gets no schedule-to-start deadline.
CREATE FUNCTION azync_job_deadlines() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.state IN ('pending', 'scheduled') THEN
        NEW.start_deadline := NEW.enqueued_at
            + make_interval(secs => (NEW.meta ->> 'schedule_to_start_s')::float8);
    END IF;
    NEW.close_deadline := NEW.enqueued_at
        + make_interval(secs => (NEW.meta ->> 'schedule_to_close_s')::float8);
    RETURN NEW;
END
$$;
CREATE TRIGGER azync_jobs_deadlines BEFORE INSERT ON azync_jobs
    FOR EACH ROW WHEN (NEW.source = 'workflow' AND NEW.task_key <> '$wft'
                       AND NEW.meta ?| ARRAY['schedule_to_start_s', 'schedule_to_close_s'])
    EXECUTE FUNCTION azync_job_deadlines();

-- Children take their timeouts from their route ({"execution_timeout_s": s,
-- "run_timeout_s": s}; missing = none).
CREATE OR REPLACE FUNCTION azync_workflow_children_start(
    p_at timestamptz, p_channel text, p_id uuid, p_run uuid, p_seqs bigint[], p_ids uuid[],
    p_names text[], p_versions text[], p_inputs bytea[], p_policies text[],
    p_carriers text[], p_routes text[]
) RETURNS SETOF uuid
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
        SELECT pg_notify(p_channel, 'workflow:$wft') FROM (SELECT 1 FROM task LIMIT 1) k
    )
    SELECT t.run_id FROM task t WHERE (SELECT count(*) FROM wake) >= 0;
END
$$;

-- Continue-as-new (migration 0009) also moves the run deadline: a fresh run
-- gets a fresh run timeout, the execution deadline stays.
CREATE OR REPLACE FUNCTION azync_workflow_continue(
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
        cancel_requested = cancel_requested AND NOT p_cancel_seen,
        timeout_at = least(created_at + execution_timeout, p_at + run_timeout)
    WHERE id = p_id;
    RETURN ex.run_no + 1;
END
$$;
