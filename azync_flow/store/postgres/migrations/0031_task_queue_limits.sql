-- Task-queue limits: a limit on everything in flight on one task queue,
-- whatever its kind (every queue job and activity routed there; workflow
-- tasks, queries and DAG tasks are not counted).
--
-- It is a limit like the kinds' (azync_limits, its slots in azync_limit_slots,
-- freed by the same trigger when the lease ends) scoped by a row of
-- azync_limit_scopes of source 'task_queue' whose kind is the task queue's
-- name. A queue job or activity on a limited queue carries a limit key ('' when
-- its kind has none), so the release trigger frees its slots, and it is leased
-- only by azync_job_lease_limited; azync_limit_admit now takes the limits of
-- the kind and of the job's task queue (one slot each; a limit named by both
-- counts once).

CREATE FUNCTION azync_limit_admit(
    p_at timestamptz, p_source text, p_kind text, p_key text, p_job uuid, p_token uuid,
    p_channel text, p_queue text
) RETURNS boolean
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    l record;
    k text;
    sl int;
    prev timestamptz;
    names text[] := '{}';
    keys text[] := '{}';
    nos int[] := '{}';
    prevs timestamptz[] := '{}';
BEGIN
    FOR l IN
        SELECT d.name, d.type, d.capacity, d.period, d.per_key
        FROM azync_limits d
        WHERE d.name IN (SELECT s.limit_name FROM azync_limit_scopes s
                         WHERE (s.source = p_source AND s.kind = p_kind)
                            OR (s.source = 'task_queue' AND s.kind = p_queue))
        ORDER BY d.name
    LOOP
        k := CASE WHEN l.per_key THEN coalesce(p_key, '') ELSE '' END;
        FOR attempt IN 1 .. 2 LOOP
            -- lock a free slot (its last use kept to undo it), then take it
            SELECT f.slot, f.used_at INTO sl, prev FROM azync_limit_slots f
            WHERE f.limit_name = l.name AND f.key = k AND f.slot <= l.capacity
              AND CASE WHEN l.type = 'concurrency' THEN f.holder IS NULL
                       ELSE f.used_at IS NULL OR f.used_at < p_at - l.period END
            ORDER BY f.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE azync_limit_slots s
                SET holder = CASE WHEN l.type = 'concurrency' THEN p_job END,
                    holder_token = CASE WHEN l.type = 'concurrency' THEN p_token END,
                    holder_channel = CASE WHEN l.type = 'concurrency' THEN p_channel END,
                    used_at = p_at
                WHERE s.limit_name = l.name AND s.key = k AND s.slot = sl;
                EXIT;
            END IF;
            -- none free: on the key's first admission its slots do not exist yet
            IF attempt = 2 OR EXISTS (SELECT 1 FROM azync_limit_slots s
                                      WHERE s.limit_name = l.name AND s.key = k
                                        AND s.slot = l.capacity) THEN
                sl := NULL;
                EXIT;
            END IF;
            -- one creator at a time and no waiting on another's uncommitted
            -- slots (two leases creating two new keys in opposite orders would
            -- deadlock): a lease that cannot create them now admits nothing
            IF NOT pg_try_advisory_xact_lock(hashtextextended('azync_limit_slots:' || l.name
                                                              || ':' || k, 0)) THEN
                sl := NULL;
                EXIT;
            END IF;
            INSERT INTO azync_limit_slots (limit_name, key, slot)
            SELECT l.name, k, g FROM generate_series(1, l.capacity) g
            ON CONFLICT DO NOTHING;
        END LOOP;
        IF sl IS NULL THEN
            -- undo the slots taken for the limits before this one
            UPDATE azync_limit_slots s
            SET holder = NULL, holder_token = NULL, holder_channel = NULL, used_at = u.prev
            FROM unnest(names, keys, nos, prevs) AS u(name, key, slot, prev)
            WHERE s.limit_name = u.name AND s.key = u.key AND s.slot = u.slot;
            RETURN false;
        END IF;
        names := names || l.name;
        keys := keys || k;
        nos := nos || sl;
        prevs := prevs || prev;
    END LOOP;
    RETURN true;
END
$$;

-- No caller of the former admission is left (a leftover would skip the task
-- queue's limits).
DROP FUNCTION azync_limit_admit(timestamptz, text, text, text, uuid, uuid, text);

CREATE OR REPLACE FUNCTION azync_limit_release() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        UPDATE azync_limit_slots s SET holder = NULL, holder_token = NULL, holder_channel = NULL
        FROM azync_limit_slots o
        WHERE s.holder = OLD.id AND s.holder_token = OLD.lease_token
          AND o.limit_name = s.limit_name AND o.key = s.key AND o.slot = s.slot
        RETURNING s.limit_name, s.key, s.slot, o.holder_channel AS channel
    LOOP
        IF r.channel IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM azync_limit_slots f JOIN azync_limits l ON l.name = f.limit_name
            WHERE f.limit_name = r.limit_name AND f.key = r.key AND f.slot <> r.slot
              AND f.slot <= l.capacity AND f.holder IS NULL) THEN
            IF EXISTS (SELECT 1 FROM azync_limit_scopes sc
                       WHERE sc.source = 'task_queue' AND sc.kind = OLD.task_queue
                         AND sc.limit_name = r.limit_name) THEN
                -- a task queue's limit: whatever kind waits on that queue (a
                -- skip scan of azync_jobs_limit_ready: one probe per limited
                -- kind with a backlog, not one row per waiting job)
                PERFORM count(*) FROM (
                    WITH RECURSIVE sk AS (
                        (SELECT j.source, j.kind FROM azync_jobs j
                         WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                         ORDER BY j.source, j.kind LIMIT 1)
                        UNION ALL
                        SELECT n.source, n.kind FROM sk CROSS JOIN LATERAL (
                            SELECT j.source, j.kind FROM azync_jobs j
                            WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                              AND (j.source, j.kind) > (sk.source, sk.kind)
                            ORDER BY j.source, j.kind LIMIT 1) n
                    )
                    SELECT pg_notify(r.channel, sk.source || ':' || sk.kind) FROM sk
                    WHERE EXISTS (SELECT 1 FROM azync_jobs j
                                  WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                                    AND j.source = sk.source AND j.kind = sk.kind
                                    AND j.task_queue = OLD.task_queue)
                ) w;
            ELSE
                PERFORM pg_notify(r.channel, OLD.source || ':' || OLD.kind);
            END IF;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION azync_job_lease_limited(
    p_at timestamptz, p_source text, p_kind text, p_queues text[], p_n int, p_lease interval,
    p_default_max int, p_override boolean, p_channel text
) RETURNS SETOF azync_jobs
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    fair text;
    heads int;
    c record;
    j azync_jobs;
    blocked text[] := '{}';
    n int := 0;
    tok uuid;
BEGIN
    IF p_n <= 0 THEN
        RETURN;
    END IF;
    -- the limit whose slots tell when a key was last admitted
    SELECT l.name INTO fair
    FROM azync_limit_scopes s JOIN azync_limits l ON l.name = s.limit_name
    WHERE (s.source = p_source AND s.kind = p_kind)
       OR (s.source = 'task_queue' AND s.kind = ANY (p_queues))
    ORDER BY NOT l.per_key, l.name LIMIT 1;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- a key never gets more than its smallest per-key capacity in one call
    heads := least(p_n, coalesce((
        SELECT min(l.capacity) FROM azync_limit_scopes s JOIN azync_limits l ON l.name = s.limit_name
        WHERE s.source = p_source AND s.kind = p_kind AND l.per_key), p_n));
    FOR c IN
        WITH RECURSIVE keys AS (
            (SELECT q.q, (SELECT j2.limit_key FROM azync_jobs j2
                          WHERE j2.state = 'pending' AND j2.source = p_source
                            AND j2.kind = p_kind AND j2.task_queue = q.q
                            AND j2.limit_key IS NOT NULL
                          ORDER BY j2.limit_key LIMIT 1) AS key
             FROM unnest(p_queues) AS q(q))
            UNION ALL
            SELECT k2.q, (SELECT j2.limit_key FROM azync_jobs j2
                          WHERE j2.state = 'pending' AND j2.source = p_source
                            AND j2.kind = p_kind AND j2.task_queue = k2.q
                            AND j2.limit_key > k2.key
                          ORDER BY j2.limit_key LIMIT 1)
            FROM keys k2 WHERE k2.key IS NOT NULL
        )
        SELECT h.id, h.limit_key, h.rank, h.o, kk.served, kk.q
        FROM (SELECT k3.q, k3.key,
                     (SELECT max(s.used_at) FROM azync_limit_slots s
                      WHERE s.limit_name = fair AND s.key = k3.key) AS served
              FROM keys k3 WHERE k3.key IS NOT NULL) kk
        CROSS JOIN LATERAL (
            SELECT j3.id, j3.limit_key, azync_due_order(j3.run_at, j3.priority) AS o,
                   row_number() OVER (ORDER BY azync_due_order(j3.run_at, j3.priority), j3.id)
                       AS rank
            FROM azync_jobs j3
            WHERE j3.state = 'pending' AND j3.source = p_source AND j3.kind = p_kind
              AND j3.task_queue = kk.q AND j3.limit_key = kk.key AND j3.run_at <= p_at
            ORDER BY azync_due_order(j3.run_at, j3.priority), j3.id
            LIMIT heads
        ) h
        ORDER BY h.rank, kk.served NULLS FIRST, h.o, h.id
    LOOP
        EXIT WHEN n >= p_n;
        CONTINUE WHEN (c.q || chr(31) || c.limit_key) = ANY (blocked);
        SELECT * INTO j FROM azync_jobs
        WHERE id = c.id AND state = 'pending' FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        tok := gen_random_uuid();
        IF NOT azync_limit_admit(p_at, p_source, p_kind, c.limit_key, j.id, tok, p_channel,
                                 c.q) THEN
            -- a key is blocked per task queue: another queue may have room
            blocked := blocked || (c.q || chr(31) || c.limit_key);
            CONTINUE;
        END IF;
        UPDATE azync_jobs x
        SET state = 'active',
            attempt = x.attempt + 1,
            lease_token = tok,
            lease_until = p_at + p_lease,
            started_at = p_at,
            updated_at = p_at,
            max_attempts = CASE
                WHEN x.max_attempts_explicit THEN x.max_attempts
                WHEN x.started_at IS NULL AND p_override THEN p_default_max
                WHEN x.max_attempts <= 0 THEN p_default_max
                ELSE x.max_attempts END
        WHERE x.id = j.id
        RETURNING x.* INTO j;
        n := n + 1;
        RETURN NEXT j;
    END LOOP;
END
$$;

CREATE FUNCTION azync_job_limit_waits(
    p_source text, p_kind text, p_key text, p_at timestamptz, p_queue text
) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT coalesce(string_agg(
        CASE WHEN sc.source = 'task_queue'
             THEN format('waits for %s limit %L of task queue %L', l.type, l.name, p_queue)
             WHEN l.per_key
             THEN format('waits for %s limit %L (key %L)', l.type, l.name, coalesce(p_key, ''))
             ELSE format('waits for %s limit %L', l.type, l.name) END, '; ' ORDER BY l.name), '')
    FROM (SELECT DISTINCT ON (s.limit_name) s.source, s.limit_name
          FROM azync_limit_scopes s
          WHERE (s.source = p_source AND s.kind = p_kind)
             OR (s.source = 'task_queue' AND s.kind = p_queue)
          ORDER BY s.limit_name, s.source = 'task_queue') sc
    JOIN azync_limits l ON l.name = sc.limit_name
    WHERE true
      AND (SELECT count(*) FROM azync_limit_slots s
           WHERE s.limit_name = l.name
             AND s.key = CASE WHEN l.per_key THEN coalesce(p_key, '') ELSE '' END
             AND s.slot <= l.capacity
             AND CASE WHEN l.type = 'concurrency' THEN s.holder IS NOT NULL
                      ELSE s.used_at >= p_at - l.period END) >= l.capacity
$$;

DROP FUNCTION azync_job_limit_waits(text, text, text, timestamptz);

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
               gen_random_uuid() AS job_id, gen_random_uuid() AS token
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
        SELECT pg_notify(p_channel, 'workflow:' || k.kind)
        FROM (SELECT DISTINCT kind FROM ins WHERE state = 'pending') k
    )
    SELECT i.* FROM ins i WHERE (SELECT count(*) FROM wake) >= 0;
END
$$;

CREATE OR REPLACE FUNCTION azync_workflow_waits(p_id uuid, p_at timestamptz) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT concat_ws('; ',
        (SELECT string_agg(DISTINCT j.blocked_reason, '; ')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = '$wft'
           AND j.state IN ('pending', 'scheduled') AND j.blocked_reason <> ''),
        (SELECT format('no live worker serves workflow %L on task queue %L',
                       j.workflow_name, j.task_queue)
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key = '$wft'
           AND j.state IN ('pending', 'scheduled') AND j.run_at <= p_at
           AND NOT EXISTS (
               SELECT 1 FROM azync_workers w
               WHERE w.expires_at > p_at AND w.workflows @> ARRAY[j.workflow_name]
                 AND w.task_queues @> ARRAY[j.task_queue])
         LIMIT 1),
        (SELECT 'no live worker serves '
                || string_agg(DISTINCT format('activity %L on task queue %L',
                                              coalesce(j.meta ->> 'activity', j.kind),
                                              j.task_queue), ', ')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key <> '$wft'
           AND j.state = 'pending'
           AND NOT EXISTS (
               SELECT 1 FROM azync_workers w
               WHERE w.expires_at > p_at AND w.activities @> ARRAY[j.kind]
                 AND w.task_queues @> ARRAY[j.task_queue])),
        (SELECT nullif(string_agg(DISTINCT azync_job_limit_waits(j.source, j.kind, j.limit_key,
                                                                  p_at, j.task_queue), '; '), '')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key <> '$wft'
           AND j.state = 'pending' AND j.limit_key IS NOT NULL AND j.run_at <= p_at))
$$;
