-- azync_flow schema v2: workflow-as-code task invariants.

-- At most ONE runnable (pending or scheduled) workflow task per execution.
-- Scheduling while one exists moves its run_at to least(existing, new)
-- (ON CONFLICT against this index); a task may still be pending while another
-- of the same execution is active (a signal arrived mid-pass). Keyed by
-- task_key '$wft' (not kind) so a future per-queue kind keeps the invariant.
CREATE UNIQUE INDEX azync_jobs_workflow_task_runnable ON azync_jobs (run_id)
    WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled');

-- The lease scan of workflow tasks: due runnable tasks in (run_at, id) order.
CREATE INDEX azync_jobs_workflow_task_due ON azync_jobs (kind, run_at, id)
    WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled');

-- Leasing a workflow task checks for an active task of the same execution
-- (passes of one execution never overlap); this keeps that probe an index hit.
CREATE INDEX azync_jobs_workflow_task_active ON azync_jobs (run_id)
    WHERE source = 'workflow' AND task_key = '$wft' AND state = 'active';

-- Operations of an execution waiting for a decision (list / resume checks).
CREATE INDEX azync_jobs_uncertain ON azync_jobs (uncertain_since, id) WHERE state = 'uncertain';

-- Safety net for non-idempotent operations: an operation whose attempt may
-- have run must never silently return to pending. A lease-expiry reap
-- (active -> pending with reap_count incremented) of a source='workflow' job
-- whose meta says idempotent=false is suppressed here — the row stays active
-- and expired — so only the workflow reaper (reap_uncertain_operations) can
-- take it, moving it to 'uncertain' with its history event. A deliberate
-- release (reap_count unchanged) and an operator's retry decision
-- (uncertain -> pending) are unaffected.
CREATE FUNCTION azync_keep_nonidempotent_op() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END
$$;

CREATE TRIGGER azync_jobs_no_blind_retry
    BEFORE UPDATE ON azync_jobs
    FOR EACH ROW
    WHEN (OLD.source = 'workflow' AND OLD.state = 'active' AND NEW.state = 'pending'
          AND NEW.reap_count > OLD.reap_count AND OLD.meta ->> 'idempotent' = 'false')
    EXECUTE FUNCTION azync_keep_nonidempotent_op();

-- Generic job verbs (Reschedule, Release, ReapExpired, RetryJob, ResumeJob ...)
-- know nothing of the one-runnable-task rule. When one of them would make a
-- workflow task runnable while another runnable task of the same execution
-- exists, the row is merged into that sibling instead of violating the
-- unique index: the sibling's run_at becomes least(both) and this row is
-- settled 'cancelled'. The execution row is locked first (every creator of
-- a runnable workflow task holds that lock), so the check cannot race.
-- SET search_path FROM CURRENT pins the migration's schema, so the function
-- finds its tables whatever search_path the updating session uses.
CREATE FUNCTION azync_merge_workflow_task() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    sibling uuid;
BEGIN
    PERFORM 1 FROM azync_workflow_executions WHERE id = NEW.run_id FOR NO KEY UPDATE;
    SELECT id INTO sibling FROM azync_jobs
    WHERE run_id = NEW.run_id AND source = 'workflow' AND task_key = '$wft'
      AND state IN ('pending', 'scheduled') AND id <> NEW.id;
    IF sibling IS NULL THEN
        RETURN NEW;
    END IF;
    UPDATE azync_jobs
    SET run_at = least(run_at, NEW.run_at),
        state = CASE WHEN least(run_at, NEW.run_at) > NEW.updated_at
                     THEN 'scheduled' ELSE 'pending' END,
        updated_at = NEW.updated_at
    WHERE id = sibling;
    NEW.state := 'cancelled';
    NEW.lease_until := NULL;
    NEW.completed_at := NEW.updated_at;
    NEW.last_error := 'superseded by runnable workflow task ' || sibling::text;
    RETURN NEW;
END
$$;

CREATE TRIGGER azync_jobs_merge_workflow_task
    BEFORE UPDATE ON azync_jobs
    FOR EACH ROW
    WHEN (OLD.source = 'workflow' AND OLD.task_key = '$wft'
          AND OLD.state NOT IN ('pending', 'scheduled')
          AND NEW.state IN ('pending', 'scheduled'))
    EXECUTE FUNCTION azync_merge_workflow_task();
