-- Priorities: every job carries a priority (an int, 0 unless set; higher
-- first), an execution too (its workflow tasks, and by default its activities
-- and children, take it). Anti-starvation by aging: a due job is leased in the
-- order of its run_at moved earlier by its priority in minutes
-- (azync_due_order), so a job of priority p goes before lower ones that became
-- due less than p minutes before it, and a job never waits more than the
-- difference of priorities (in minutes) behind later higher ones.
ALTER TABLE azync_jobs ADD COLUMN priority int NOT NULL DEFAULT 0;
ALTER TABLE azync_workflow_executions ADD COLUMN priority int NOT NULL DEFAULT 0;

-- The lease order of a due job. Immutable (an index key): only whole minutes
-- are subtracted, which no time zone changes.
CREATE FUNCTION azync_due_order(p_run_at timestamptz, p_priority int) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT p_run_at - p_priority * interval '1 minute' $$;

-- The hot leases walk these in lease order: pending jobs of a (source, kind)
-- on a queue, and the pending workflow tasks of a (queue, workflow). Due
-- scheduled workflow tasks (timers of executions in flight) are leased by
-- run_at from their own index, whose scan stops at the first one not due.
DROP INDEX azync_jobs_ready;
CREATE INDEX azync_jobs_ready ON azync_jobs
    (source, kind, task_queue, azync_due_order(run_at, priority), id)
    WHERE state = 'pending';
DROP INDEX azync_jobs_workflow_task_due;
CREATE INDEX azync_jobs_workflow_task_due ON azync_jobs
    (task_queue, workflow_name, first_pass, azync_due_order(run_at, priority), id)
    WHERE source = 'workflow' AND task_key = '$wft' AND state = 'pending';
CREATE INDEX azync_jobs_workflow_task_timed ON azync_jobs
    (task_queue, workflow_name, run_at, id)
    WHERE source = 'workflow' AND task_key = '$wft' AND state = 'scheduled';

-- The one runnable workflow task of an execution carries its priority.
CREATE OR REPLACE FUNCTION azync_schedule_workflow_task(
    p_run uuid, p_kind text, p_run_at timestamptz, p_at timestamptz, p_channel text
) RETURNS TABLE (id uuid, state text, kind text, inserted boolean)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
        SELECT pg_notify(p_channel, 'workflow:' || u.kind) FROM up u WHERE u.state = 'pending'
    )
    SELECT u.id, u.state, u.kind, u.inserted FROM up u
    WHERE (SELECT count(*) FROM wake) >= 0;
END
$$;

-- Operations and children (migration 0026) take their priority from their
-- route ({"priority": p}; missing = 0).
CREATE OR REPLACE FUNCTION azync_workflow_ops_insert(
    p_at timestamptz, p_channel text, p_id uuid, p_kinds text[], p_payloads bytea[],
    p_metas text[], p_keys text[], p_run_ats timestamptz[], p_max_attempts int[],
    p_routes text[], p_local_keys text[], p_local_lease interval, p_local_budget int
) RETURNS TABLE (task_key text, id uuid, kind text, state text, attempt int, max_attempts int,
                 lease_token uuid, lease_until timestamptz, started_at timestamptz,
                 run_at timestamptz, enqueued_at timestamptz)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH req AS (
        SELECT u.*, coalesce(u.run_at, p_at) AS due,
               (u.run_at IS NULL AND u.key = ANY(coalesce(p_local_keys, '{}'))) AS leased,
               coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
               coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority
        FROM unnest(p_kinds, p_payloads, p_metas, p_keys, p_run_ats, p_max_attempts, p_routes)
             WITH ORDINALITY AS u(kind, payload, meta, key, run_at, max_attempts, route, ord)
    ), existing AS (
        SELECT DISTINCT j.task_key FROM azync_jobs j
        WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = ANY(p_keys)
          AND j.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')
    ), ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, payload, meta, run_at,
                                max_attempts, max_attempts_explicit, run_id, task_key,
                                enqueued_at, updated_at, attempt, lease_token,
                                lease_until, started_at, task_queue, priority)
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
               CASE WHEN r.leased THEN p_at END,
               r.task_queue, r.priority
        FROM req r
        WHERE NOT EXISTS (SELECT 1 FROM existing e WHERE e.task_key = r.key)
        ORDER BY r.ord
        RETURNING task_key, id, kind, state, attempt, max_attempts, lease_token,
                  lease_until, started_at, run_at, enqueued_at
    ), wake AS (
        SELECT pg_notify(p_channel, 'workflow:' || k.kind)
        FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
    )
    SELECT i.* FROM ins i WHERE (SELECT count(*) FROM wake) >= 0;
END
$$;

CREATE OR REPLACE FUNCTION azync_workflow_children_start(
    p_at timestamptz, p_channel text, p_id uuid, p_run uuid, p_seqs bigint[], p_ids uuid[],
    p_names text[], p_versions text[], p_inputs bytea[], p_policies text[],
    p_carriers text[], p_routes text[]
) RETURNS SETOF uuid
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    RETURN QUERY WITH req AS (
        SELECT u.*, coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
               coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority
        FROM unnest(p_seqs, p_ids, p_names, p_versions, p_inputs, p_policies, p_carriers,
                    p_routes) WITH ORDINALITY
             AS u(seq, id, name, version, input, policy, carrier, route, ord)
    ), ins AS (
        INSERT INTO azync_workflow_executions (id, name, version, state, input, trace_context,
                                               parent_id, parent_run_id, parent_seq,
                                               parent_close_policy, task_queue, priority,
                                               created_at, updated_at)
        SELECT r.id, r.name, r.version, 'running', r.input, r.carrier::jsonb, p_id, p_run,
               r.seq, r.policy, r.task_queue, r.priority, p_at, p_at
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
