-- Limits: concurrency and rate limits enforced across every worker.
--
-- A limit is a named definition (azync_limits) attached to job kinds
-- (azync_limit_scopes: an activity's '$op:<name>@<version>' of source
-- 'workflow', or a queue kind of source 'queue'). A job of a limited kind
-- carries its key (azync_jobs.limit_key; '' when it has none) and is leased
-- only by azync_job_lease_limited, which takes one slot of every limit of its
-- kind in the lease transaction:
--
-- * a limit has `capacity` slot rows per key (azync_limit_slots; the key is
--   '' for a global limit), created on the first lease of the key;
-- * a concurrency slot is free while its holder is NULL; the lease sets the
--   holder, and a trigger clears it when the holder's lease ends (settled,
--   released, snoozed, reaped or deleted), so a SIGKILLed worker's slot
--   frees when its job is reaped;
-- * a rate slot is free when it was last used more than `period` ago, so no
--   window of `period` holds more than `capacity` starts.
--
-- Slots are taken FOR UPDATE SKIP LOCKED and judged only on their own columns:
-- READ COMMITTED re-checks a locked row's newest version, so two leases never
-- take one slot. No shared counter: racing leases lock different slots.
CREATE TABLE azync_limits (
    name text NOT NULL,
    type text NOT NULL,
    capacity int NOT NULL,
    period interval,
    per_key boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL,
    CONSTRAINT azync_limits_pkey PRIMARY KEY (name),
    CONSTRAINT azync_limits_type_check CHECK (type IN ('concurrency', 'rate')),
    CONSTRAINT azync_limits_capacity_check CHECK (capacity BETWEEN 1 AND 10000),
    CONSTRAINT azync_limits_period_check CHECK (
        (type = 'rate' AND period > interval '0') OR (type = 'concurrency' AND period IS NULL))
);

CREATE TABLE azync_limit_scopes (
    source text NOT NULL,
    kind text NOT NULL,
    limit_name text NOT NULL REFERENCES azync_limits (name) ON DELETE CASCADE,
    CONSTRAINT azync_limit_scopes_pkey PRIMARY KEY (source, kind, limit_name)
);
CREATE INDEX azync_limit_scopes_limit ON azync_limit_scopes (limit_name);

CREATE TABLE azync_limit_slots (
    limit_name text NOT NULL REFERENCES azync_limits (name) ON DELETE CASCADE,
    key text NOT NULL,
    slot int NOT NULL,
    holder uuid,
    holder_token uuid,
    used_at timestamptz,
    CONSTRAINT azync_limit_slots_pkey PRIMARY KEY (limit_name, key, slot)
);
CREATE INDEX azync_limit_slots_holder ON azync_limit_slots (holder) WHERE holder IS NOT NULL;

ALTER TABLE azync_jobs ADD COLUMN limit_key text;

-- The limited lease walks the backlogged keys of a (source, kind, queue) and
-- the head of each in lease order.
CREATE INDEX azync_jobs_limit_ready ON azync_jobs
    (source, kind, task_queue, limit_key, azync_due_order(run_at, priority), id)
    WHERE state = 'pending' AND limit_key IS NOT NULL;

-- A concurrency slot frees when its holder's lease ends. Fires only for jobs
-- that carry a limit key (the WHEN clause costs other jobs nothing).
CREATE FUNCTION azync_limit_release() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE azync_limit_slots s SET holder = NULL, holder_token = NULL
    WHERE s.holder = OLD.id AND s.holder_token = OLD.lease_token;
    RETURN NULL;
END
$$;
CREATE TRIGGER azync_jobs_limit_release AFTER UPDATE OF state, lease_token ON azync_jobs
    FOR EACH ROW
    WHEN (OLD.limit_key IS NOT NULL AND OLD.state = 'active'
          AND (NEW.state <> 'active' OR NEW.lease_token IS DISTINCT FROM OLD.lease_token))
    EXECUTE FUNCTION azync_limit_release();
CREATE TRIGGER azync_jobs_limit_release_deleted AFTER DELETE ON azync_jobs
    FOR EACH ROW WHEN (OLD.limit_key IS NOT NULL AND OLD.state = 'active')
    EXECUTE FUNCTION azync_limit_release();

-- Lease up to p_n due pending jobs of a limited (source, kind) on p_queues.
-- Fairness: the candidates are the heads of each backlogged key, taken round
-- by round (every key's first job, then every key's second...), and within a
-- round the key admitted longest ago first (its slots' used_at). A job is
-- leased when one free slot of every limit of its kind is taken for it; a key
-- whose head cannot be admitted is passed over for the rest of the call.
CREATE FUNCTION azync_job_lease_limited(
    p_at timestamptz, p_source text, p_kind text, p_queues text[], p_n int, p_lease interval,
    p_default_max int, p_override boolean
) RETURNS SETOF azync_jobs
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    names text[];
    types text[];
    caps int[];
    periods interval[];
    keyed boolean[];
    fair text;
    c record;
    j azync_jobs;
    k text;
    sl int;
    slot_names text[];
    slot_keys text[];
    slot_nos int[];
    blocked text[] := '{}';
    ok boolean;
    n int := 0;
    tok uuid;
BEGIN
    SELECT array_agg(l.name ORDER BY l.name), array_agg(l.type ORDER BY l.name),
           array_agg(l.capacity ORDER BY l.name), array_agg(l.period ORDER BY l.name),
           array_agg(l.per_key ORDER BY l.name)
    INTO names, types, caps, periods, keyed
    FROM azync_limit_scopes s JOIN azync_limits l ON l.name = s.limit_name
    WHERE s.source = p_source AND s.kind = p_kind;
    IF names IS NULL OR p_n <= 0 THEN
        RETURN;
    END IF;
    fair := (SELECT x.name FROM unnest(names, keyed) AS x(name, keyed) WHERE x.keyed LIMIT 1);
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
        SELECT h.id, h.limit_key, h.rank, h.o,
               (SELECT max(s.used_at) FROM azync_limit_slots s
                WHERE s.limit_name = fair AND s.key = h.limit_key) AS served
        FROM keys kk
        CROSS JOIN LATERAL (
            SELECT j3.id, j3.limit_key, azync_due_order(j3.run_at, j3.priority) AS o,
                   row_number() OVER (ORDER BY azync_due_order(j3.run_at, j3.priority), j3.id)
                       AS rank
            FROM azync_jobs j3
            WHERE j3.state = 'pending' AND j3.source = p_source AND j3.kind = p_kind
              AND j3.task_queue = kk.q AND j3.limit_key = kk.key AND j3.run_at <= p_at
            ORDER BY azync_due_order(j3.run_at, j3.priority), j3.id
            LIMIT p_n
        ) h
        WHERE kk.key IS NOT NULL
        ORDER BY h.rank, served NULLS FIRST, h.o, h.id
    LOOP
        EXIT WHEN n >= p_n;
        CONTINUE WHEN c.limit_key = ANY (blocked);
        SELECT * INTO j FROM azync_jobs
        WHERE id = c.id AND state = 'pending' FOR UPDATE SKIP LOCKED;
        CONTINUE WHEN NOT FOUND;
        ok := true;
        slot_names := '{}';
        slot_keys := '{}';
        slot_nos := '{}';
        FOR i IN 1 .. cardinality(names) LOOP
            k := CASE WHEN keyed[i] THEN c.limit_key ELSE '' END;
            IF NOT EXISTS (SELECT 1 FROM azync_limit_slots s
                           WHERE s.limit_name = names[i] AND s.key = k AND s.slot = caps[i]) THEN
                INSERT INTO azync_limit_slots (limit_name, key, slot)
                SELECT names[i], k, g FROM generate_series(1, caps[i]) g
                ON CONFLICT DO NOTHING;
            END IF;
            IF types[i] = 'concurrency' THEN
                SELECT s.slot INTO sl FROM azync_limit_slots s
                WHERE s.limit_name = names[i] AND s.key = k AND s.slot <= caps[i]
                  AND s.holder IS NULL
                ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
            ELSE
                SELECT s.slot INTO sl FROM azync_limit_slots s
                WHERE s.limit_name = names[i] AND s.key = k AND s.slot <= caps[i]
                  AND (s.used_at IS NULL OR s.used_at < p_at - periods[i])
                ORDER BY s.slot LIMIT 1 FOR UPDATE SKIP LOCKED;
            END IF;
            IF NOT FOUND THEN
                ok := false;
                EXIT;
            END IF;
            slot_names := slot_names || names[i];
            slot_keys := slot_keys || k;
            slot_nos := slot_nos || sl;
        END LOOP;
        IF NOT ok THEN
            -- the slots taken so far stay locked until the commit: a racing
            -- lease skips them (admits less for a moment, never more)
            blocked := blocked || c.limit_key;
            CONTINUE;
        END IF;
        tok := gen_random_uuid();
        UPDATE azync_limit_slots s
        SET holder = CASE WHEN t.type = 'concurrency' THEN j.id END,
            holder_token = CASE WHEN t.type = 'concurrency' THEN tok END,
            used_at = p_at
        FROM unnest(slot_names, slot_keys, slot_nos) AS u(name, key, slot)
        JOIN azync_limits t ON t.name = u.name
        WHERE s.limit_name = u.name AND s.key = u.key AND s.slot = u.slot;
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

-- Why a pending job of a limited kind waits ('' when no limit of its kind is
-- full): each full limit named with its key.
CREATE FUNCTION azync_job_limit_waits(
    p_source text, p_kind text, p_key text, p_at timestamptz
) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT coalesce(string_agg(
        CASE WHEN l.per_key
             THEN format('waits for %s limit %L (key %L)', l.type, l.name, coalesce(p_key, ''))
             ELSE format('waits for %s limit %L', l.type, l.name) END, '; ' ORDER BY l.name), '')
    FROM azync_limit_scopes sc JOIN azync_limits l ON l.name = sc.limit_name
    WHERE sc.source = p_source AND sc.kind = p_kind
      AND (SELECT count(*) FROM azync_limit_slots s
           WHERE s.limit_name = l.name
             AND s.key = CASE WHEN l.per_key THEN coalesce(p_key, '') ELSE '' END
             AND s.slot <= l.capacity
             AND CASE WHEN l.type = 'concurrency' THEN s.holder IS NOT NULL
                      ELSE s.used_at >= p_at - l.period END) >= l.capacity
$$;

-- Operations of a limited activity are never leased in the pass that
-- schedules them (local dispatch): only the limited lease admits them. They
-- carry the limit key of their route ({"limit_key": k}).
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
               (u.run_at IS NULL AND u.key = ANY(coalesce(p_local_keys, '{}'))
                AND NOT EXISTS (SELECT 1 FROM azync_limit_scopes sc
                                WHERE sc.source = 'workflow' AND sc.kind = u.kind)) AS leased,
               coalesce(u.route::jsonb ->> 'task_queue', 'default') AS task_queue,
               coalesce((u.route::jsonb ->> 'priority')::int, 0) AS priority,
               u.route::jsonb ->> 'limit_key' AS limit_key
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
                                lease_until, started_at, task_queue, priority, limit_key)
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
               r.task_queue, r.priority, r.limit_key
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

-- An execution also says which limit its due operations wait for.
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
                                                                  p_at), '; '), '')
         FROM azync_jobs j
         WHERE j.run_id = p_id AND j.source = 'workflow' AND j.task_key <> '$wft'
           AND j.state = 'pending' AND j.limit_key IS NOT NULL AND j.run_at <= p_at))
$$;
