-- The wake of a workflow task by another execution (a child reporting to its
-- parent, a parent-close request_cancel) counts the task it inserts, as every
-- other verb that inserts a workflow task does (enqueued +1).
CREATE OR REPLACE FUNCTION azync_workflow_wake_task(p_id uuid, p_at timestamptz, p_channel text)
RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    t record;
BEGIN
    SELECT * INTO t FROM azync_schedule_workflow_task(p_id, '$wft', p_at, p_at, p_channel);
    IF t.inserted THEN
        PERFORM azync_job_count(p_at, ARRAY[ROW('workflow', t.kind, 1, 0, 0, 0)::azync_job_delta]);
    END IF;
END
$$;
