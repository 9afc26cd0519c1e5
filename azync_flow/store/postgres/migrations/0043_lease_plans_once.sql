-- The workflow-task lease plans once per connection. As a prepared statement
-- its plan depends on the served queues and names, the limit and the known
-- executions, so the planner made a custom plan on every call (about 3.6 ms of
-- planning per lease under load, more than the lease ran). The statement is
-- the same, moved into a function whose statements use the generic plan, as
-- the pass commit's do; the named query workflow_task_lease_load expands the
-- leased job and execution rows it returns. A generic plan cannot know the
-- limit is a batch (it assumes a tenth of the candidates) and would hash-join
-- the leased rows against a scan of the whole job table; joins and scans are
-- pinned to index nested loops, the plan every call wants.
CREATE FUNCTION azync_workflow_task_lease_load(
    p_now timestamptz, p_kind text, p_limit int, p_lease interval, p_known_ids uuid[],
    p_known_after bigint[], p_first boolean, p_queues text[], p_names text[],
    p_exclude uuid[])
RETURNS TABLE (job azync_jobs, load_stale boolean, after_seq bigint,
               ex azync_workflow_executions, h_seq bigint[], h_type text[],
               h_payload bytea[], h_created timestamptz[], s_id bigint[], s_name text[],
               s_message_id text[], s_payload bytea[], due_timer_seqs bigint[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH pairs AS (
        SELECT q.q, n.n FROM unnest(p_queues) AS q(q), unnest(p_names) AS n(n)
        UNION
        SELECT j.task_queue, j.workflow_name FROM azync_jobs j
        WHERE (p_queues IS NULL OR p_names IS NULL)
          AND j.source = 'workflow' AND j.task_key = '$wft' AND j.state IN ('pending', 'scheduled')
          AND (p_queues IS NULL OR j.task_queue = ANY(p_queues))
          AND (p_names IS NULL OR j.workflow_name = ANY(p_names))
    ), due AS (
        SELECT c.* FROM pairs p
        CROSS JOIN LATERAL (
            SELECT j.id, j.first_pass, azync_due_order(j.run_at, j.priority) AS o,
                   j.xmin::text AS v FROM azync_jobs j
            WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'pending'
              AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
              AND j.first_pass <= p_first
              AND j.run_at <= coalesce(p_now, now())
              AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
              AND NOT EXISTS (
                  SELECT 1 FROM azync_jobs a
                  WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                    AND a.state = 'active')
            ORDER BY j.first_pass, azync_due_order(j.run_at, j.priority), j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
    ), timed AS (
        SELECT c.* FROM pairs p
        CROSS JOIN LATERAL (
            SELECT j.id, j.first_pass, azync_due_order(j.run_at, j.priority) AS o,
                   j.xmin::text AS v FROM azync_jobs j
            WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
              AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
              AND j.run_at <= coalesce(p_now, now())
              AND j.first_pass <= p_first
              AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
              AND NOT EXISTS (
                  SELECT 1 FROM azync_jobs a
                  WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                    AND a.state = 'active')
            ORDER BY j.run_at, j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
    ), picked AS (
        SELECT c.id, c.v FROM (SELECT * FROM due UNION ALL SELECT * FROM timed) c
        ORDER BY c.first_pass, c.o, c.id
        LIMIT p_limit
    ), leased AS (
        UPDATE azync_jobs j
        SET state = 'active',
            attempt = j.attempt + 1,
            lease_token = azync_lease_token(),
            lease_until = coalesce(p_now, now()) + p_lease,
            started_at = coalesce(p_now, now()),
            updated_at = coalesce(p_now, now())
        FROM picked
        WHERE j.id = picked.id
        RETURNING j AS job, picked.v AS locked_version
    ), known AS (
        SELECT k.id, k.after FROM unnest(p_known_ids, p_known_after) AS k(id, after)
    )
    SELECT l.job,
           (SELECT x.xmin::text FROM azync_jobs x WHERE x.id = (l.job).id)
               IS DISTINCT FROM l.locked_version,
           coalesce((SELECT k.after FROM known k WHERE k.id = (l.job).run_id), 0),
           e,
           h.h_seq, h.h_type, h.h_payload, h.h_created, s.s_id, s.s_name, s.s_message_id, s.s_payload,
           ARRAY(SELECT t.seq FROM azync_workflow_timers t
                 WHERE t.workflow_id = e.id AND t.fired_at IS NULL
                   AND t.fire_at <= coalesce(p_now, now())
                 ORDER BY t.fire_at, t.seq)
    FROM leased l
    JOIN azync_workflow_executions e ON e.id = (l.job).run_id
    CROSS JOIN LATERAL (
        SELECT array_agg(x.seq ORDER BY x.seq) AS h_seq, array_agg(x.type ORDER BY x.seq) AS h_type,
               array_agg(x.payload ORDER BY x.seq) AS h_payload,
               array_agg(x.created_at ORDER BY x.seq) AS h_created
        FROM azync_workflow_history x
        WHERE x.workflow_id = e.id
          AND x.seq > coalesce((SELECT k.after FROM known k WHERE k.id = (l.job).run_id), 0)
    ) h
    CROSS JOIN LATERAL (
        SELECT array_agg(g.id ORDER BY g.id) AS s_id, array_agg(g.name ORDER BY g.id) AS s_name,
               array_agg(g.message_id ORDER BY g.id) AS s_message_id,
               array_agg(g.payload ORDER BY g.id) AS s_payload
        FROM azync_workflow_signals g
        WHERE g.workflow_id = e.id AND g.consumed_seq IS NULL
    ) s;
END
$function$;
