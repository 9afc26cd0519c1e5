-- Two fixes to the insert of a pass's operations.
-- * An operation already live is found by an index probe for the pass's own
--   keys. Scanning every live key of the run made a wide pass beside many live
--   operations cost their product.
-- * One wake-up per kind left pending, not one per operation. Each appends a
--   line to the statement's wake list, so a pass of 50,000 remote activities
--   cost their square.

CREATE OR REPLACE FUNCTION azync_workflow_ops_insert(p_at timestamp with time zone, p_channel text, p_id uuid, p_kinds text[], p_payloads bytea[], p_metas text[], p_keys text[], p_run_ats timestamp with time zone[], p_max_attempts integer[], p_routes text[], p_local_keys text[], p_local_lease interval, p_local_budget integer)
 RETURNS TABLE(task_key text, id uuid, kind text, state text, attempt integer, max_attempts integer, lease_token uuid, lease_until timestamp with time zone, started_at timestamp with time zone, run_at timestamp with time zone, enqueued_at timestamp with time zone)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
#variable_conflict use_column
DECLARE
    woken text[] := '{}';
BEGIN
    IF jsonb_path_exists(('[' || coalesce(array_to_string(p_routes, ','), '') || ']')::jsonb,
                         '$[*].limit_key')
       OR EXISTS (SELECT 1 FROM azync_limit_scopes sc
                  WHERE sc.source = 'task_queue'
                     OR (sc.source = 'workflow' AND sc.kind = ANY(p_kinds))) THEN
        -- limited operations: admitted one by one, in order
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
        RETURN;
    END IF;
    -- No limit applies: one plain insert of those not live already.
    RETURN QUERY
    INSERT INTO azync_jobs AS j (id, source, kind, state, payload, meta, run_at,
                                 max_attempts, max_attempts_explicit, run_id, task_key,
                                 enqueued_at, updated_at, attempt, lease_token,
                                 lease_until, started_at, task_queue, priority)
    SELECT gen_random_uuid(), 'workflow', u.kind,
           CASE WHEN u.local THEN 'active' WHEN u.due > p_at THEN 'scheduled'
                ELSE 'pending' END,
           u.payload, u.meta::jsonb, u.due,
           CASE WHEN u.local AND u.max_attempts <= 0 THEN p_local_budget
                ELSE u.max_attempts END,
           u.max_attempts > 0, p_id, u.key, p_at, p_at,
           CASE WHEN u.local THEN 1 ELSE 0 END,
           CASE WHEN u.local THEN azync_lease_token() END,
           CASE WHEN u.local THEN p_at + p_local_lease END,
           CASE WHEN u.local THEN p_at END,
           coalesce(u.route::jsonb ->> 'task_queue', 'default'),
           coalesce((u.route::jsonb ->> 'priority')::int, 0)
    FROM (SELECT v.*, coalesce(v.run_at, p_at) AS due,
                 (v.run_at IS NULL AND v.key = ANY(coalesce(p_local_keys, '{}'))) AS local
          FROM unnest(p_kinds, p_payloads, p_metas, p_keys, p_run_ats, p_max_attempts, p_routes)
               WITH ORDINALITY AS v(kind, payload, meta, key, run_at, max_attempts, route, ord)
         ) u
    WHERE u.key <> ALL (ARRAY(
        SELECT x.task_key FROM azync_jobs x
        WHERE x.run_id = p_id AND x.task_key = ANY(p_keys) AND x.source = 'workflow'
          AND x.state IN ('pending', 'scheduled', 'active', 'paused', 'uncertain')))
    RETURNING j.task_key, j.id, j.kind, j.state, j.attempt, j.max_attempts, j.lease_token,
              j.lease_until, j.started_at, j.run_at, j.enqueued_at;
    -- a wake per kind left pending (one for an operation live already is harmless)
    FOR i IN 1 .. coalesce(cardinality(p_keys), 0) LOOP
        IF p_run_ats[i] IS NULL AND NOT p_keys[i] = ANY(coalesce(p_local_keys, '{}'))
           AND NOT p_kinds[i] = ANY(woken) THEN
            PERFORM azync_wake(p_channel, 'workflow:' || p_kinds[i]);
            woken := woken || p_kinds[i];
        END IF;
    END LOOP;
END
$function$;
