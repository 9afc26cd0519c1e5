-- Counters off the hot path. Every count of a start, pass commit, settle,
-- signal, publish or DAG task settle used to upsert one of a few shared daily
-- rows of azync_job_stats and hold that row lock until commit, so concurrent
-- transactions (and every publisher of an event type, behind a caller's open
-- transaction) waited on each other. Now a count only INSERTs delta rows into
-- azync_job_stat_deltas; the leader's maintenance folds them into
-- azync_job_stats (stats_fold), and every reader sums both tables, so counts
-- are exact whether or not a fold has run.

-- Insert-only on the hot path: no index, no key (an index would be written
-- by every counting transaction); the fold and the readers scan it, and the
-- fold keeps it small. Its deletes leave dead rows: vacuum them early.
CREATE TABLE azync_job_stat_deltas (
    source     text NOT NULL,
    kind       text NOT NULL,
    day        date NOT NULL,
    enqueued   bigint NOT NULL,
    processed  bigint NOT NULL,
    failed     bigint NOT NULL,
    reaped     bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 10000);

-- Only the fold writes azync_job_stats now: one row per (source, kind, day).
-- The shards that spread hot-path row locks are merged and dropped.
WITH old AS (
    DELETE FROM azync_job_stats WHERE shard <> 0
    RETURNING source, kind, day, enqueued, processed, failed, reaped
)
INSERT INTO azync_job_stats AS s (source, kind, day, shard, enqueued, processed, failed, reaped)
SELECT source, kind, day, 0, sum(enqueued), sum(processed), sum(failed), sum(reaped)
FROM old
GROUP BY source, kind, day
ON CONFLICT (source, kind, day, shard) DO UPDATE
    SET enqueued = s.enqueued + EXCLUDED.enqueued,
        processed = s.processed + EXCLUDED.processed,
        failed = s.failed + EXCLUDED.failed,
        reaped = s.reaped + EXCLUDED.reaped;
ALTER TABLE azync_job_stats DROP COLUMN shard;
ALTER TABLE azync_job_stats ADD PRIMARY KEY (source, kind, day);

-- The one counter write: the deltas summed per (source, kind) and inserted as
-- rows of the day of p_at (all-zero sums skipped). An INSERT only, so
-- concurrent counting transactions never wait on each other. Returns the
-- rows inserted (NULL for NULL deltas: nothing to count).
CREATE OR REPLACE FUNCTION azync_job_count(p_at timestamptz, p_deltas azync_job_delta[])
    RETURNS bigint
    LANGUAGE plpgsql STRICT SET search_path FROM CURRENT AS $$
DECLARE
    written bigint;
BEGIN
    WITH w AS (
        INSERT INTO azync_job_stat_deltas (source, kind, day, enqueued, processed, failed,
                                           reaped)
        SELECT u.source, u.kind, (p_at AT TIME ZONE 'UTC')::date,
               sum(coalesce(u.enqueued, 0)), sum(coalesce(u.processed, 0)),
               sum(coalesce(u.failed, 0)), sum(coalesce(u.reaped, 0))
        FROM unnest(p_deltas) AS u
        GROUP BY u.source, u.kind
        HAVING sum(abs(coalesce(u.enqueued, 0)) + abs(coalesce(u.processed, 0))
                   + abs(coalesce(u.failed, 0)) + abs(coalesce(u.reaped, 0))) > 0
        RETURNING 1
    )
    SELECT count(*) INTO written FROM w;
    RETURN written;
END
$$;

-- The ledger fan-out of one event (migration 0004), counting its deliveries
-- through azync_job_count: it runs in the publisher's transaction, which may
-- be the caller's own and stay open; an insert holds no lock that another
-- publisher of the type could wait on.
CREATE OR REPLACE FUNCTION azync_publish_event(
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
        SELECT azync_job_count(p_at, array_agg(ROW('event', kind, 1, 0, 0, 0)::azync_job_delta))
        FROM ins
    ), wake AS (
        SELECT pg_notify(p_channel, 'event:' || kind) FROM ins
    )
    SELECT count(*) INTO delivered FROM ins
    WHERE (SELECT count(*) FROM wake) >= 0 AND (SELECT count(*) FROM stat) >= 0;
    RETURN delivered;
END
$$;
