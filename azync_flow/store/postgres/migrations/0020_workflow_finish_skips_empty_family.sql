-- The terminal transition calls the parent-close and parent-report steps only
-- when there is something to do: a live child to close, a parent to report
-- to. Each is a function call whose entry costs more than the check (most
-- executions have neither). Children of this run cannot appear meanwhile:
-- only this execution's passes start them, and the caller holds its row.
CREATE OR REPLACE FUNCTION azync_workflow_finish(
    p_id uuid, p_state text, p_result bytea, p_reason text, p_at timestamptz, p_channel text
) RETURNS TABLE (retired bigint, undelivered int)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    fam record;
BEGIN
    SELECT * INTO r FROM azync_workflow_finish_run(p_id, p_state, p_result, p_reason, p_at,
                                                   p_channel);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT coalesce(e.run_id, e.id) AS run, e.parent_id INTO fam
    FROM azync_workflow_executions e WHERE e.id = p_id;
    IF EXISTS (
        SELECT 1 FROM azync_workflow_executions c
        WHERE c.parent_id = p_id AND c.parent_run_id = fam.run
          AND c.state IN ('running', 'suspended') AND c.parent_close_policy <> 'abandon'
    ) THEN
        PERFORM azync_workflow_close_children(p_id, fam.run, p_at, p_channel);
    END IF;
    IF fam.parent_id IS NOT NULL THEN
        PERFORM azync_workflow_notify_parent(p_id, p_state, p_result, p_reason, p_at,
                                             p_channel);
    END IF;
    RETURN QUERY SELECT r.retired, r.undelivered;
END
$$;
