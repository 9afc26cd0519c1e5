-- Per-key ordered subscribers: a subscriber registered with ordered = true has
-- its deliveries stamped with the event's key (order_key) and a publish
-- sequence number (order_seq). event_dequeue leases such a delivery only while
-- no delivery of the same subscriber and key is active, and none earlier in
-- the sequence is still to run (pending, or scheduled for a retry). Rows of
-- unordered subscribers (and of every other source) keep both NULL.
ALTER TABLE azync_subscribers ADD COLUMN ordered boolean NOT NULL DEFAULT false;
ALTER TABLE azync_jobs ADD COLUMN order_key text;
ALTER TABLE azync_jobs ADD COLUMN order_seq bigint;

-- Taken once per event published to an ordered subscriber: a sequence, not a
-- counter row, so concurrent publishers never wait on each other.
CREATE SEQUENCE azync_event_order_seq;

-- The two probes of the lease statement: an earlier delivery of the key still
-- to run, and an active delivery of the key. Partial, so they hold only the
-- live deliveries of ordered subscribers.
CREATE INDEX azync_jobs_event_order ON azync_jobs (kind, order_key, order_seq)
    WHERE order_key IS NOT NULL AND state IN ('pending', 'scheduled', 'active');
CREATE INDEX azync_jobs_event_order_active ON azync_jobs (kind, order_key)
    WHERE order_key IS NOT NULL AND state = 'active';

-- The ledger fan-out of one event (as migration 0012), stamping the deliveries
-- of ordered subscribers with the key and the next sequence number.
CREATE OR REPLACE FUNCTION azync_publish_event(
    p_id uuid, p_type text, p_aggregate_type text, p_aggregate_id text, p_version bigint,
    p_occurred_at timestamptz, p_payload bytea, p_meta jsonb, p_channel text,
    p_at timestamptz
) RETURNS bigint
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    delivered bigint;
    seq bigint;
BEGIN
    INSERT INTO azync_events (id, type, aggregate_type, aggregate_id, version, occurred_at,
                              payload, meta, created_at)
    VALUES (p_id, p_type, p_aggregate_type, p_aggregate_id, p_version, p_occurred_at,
            p_payload, p_meta, p_at);
    IF EXISTS (SELECT 1 FROM azync_subscribers s WHERE s.event_type = p_type AND s.ordered) THEN
        seq := nextval('azync_event_order_seq');
    END IF;
    WITH ins AS (
        INSERT INTO azync_jobs (id, source, kind, state, run_at, max_attempts,
                                max_attempts_explicit, event_id, enqueued_at, updated_at,
                                order_key, order_seq)
        SELECT gen_random_uuid(), 'event', s.name, 'pending', p_at, s.max_attempts,
               s.max_attempts > 0, p_id, p_at, p_at,
               CASE WHEN s.ordered THEN p_aggregate_id END,
               CASE WHEN s.ordered THEN seq END
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
