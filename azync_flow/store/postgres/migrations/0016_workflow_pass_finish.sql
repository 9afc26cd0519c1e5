-- A pass that only appends events and ends its execution (complete, fail or
-- cancelled) in ONE statement, so ONE round trip: the same steps, in the same
-- order, as the transaction it replaces (fence, ack, history, the terminal
-- transition, stats). Each step is its own statement inside the function, so
-- azync_workflow_finish still takes its snapshot after the execution row is
-- locked and sees every signal accepted before (see migration 0004).
--
-- p_job_ids / p_tokens: the jobs that carried the pass (its workflow task when
-- p_task, else the operations whose outcomes are among the events; none for a
-- first pass inside its start's transaction), fenced by their lease tokens and
-- locked in id order, then the execution row, whose next_seq must be
-- p_expected and state running. ok = false: a fence failed, nothing written.
-- No row: the execution does not exist.
CREATE FUNCTION azync_workflow_pass_finish(
    p_id uuid, p_job_ids uuid[], p_tokens uuid[], p_task boolean, p_expected bigint,
    p_types text[], p_payloads bytea[], p_awaited text[],
    p_state text, p_result bytea, p_reason text, p_at timestamptz, p_channel text
) RETURNS TABLE (ok boolean, fenced bigint, state text, next_seq bigint, at timestamptz)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    n bigint;
    ex record;
    deltas azync_job_delta[];
BEGIN
    SELECT count(*) INTO n FROM (
        SELECT j.id FROM azync_jobs j
        JOIN unnest(p_job_ids, p_tokens) AS u(id, token)
          ON j.id = u.id AND j.lease_token = u.token
        WHERE j.state = 'active' AND j.source = 'workflow' AND j.run_id = p_id
          AND (j.task_key = '$wft') = p_task
        ORDER BY j.id
        FOR UPDATE OF j
    ) locked;
    SELECT e.state, e.next_seq INTO ex FROM azync_workflow_executions e
    WHERE e.id = p_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF n <> cardinality(p_job_ids) OR ex.next_seq <> p_expected OR ex.state <> 'running' THEN
        RETURN QUERY SELECT false, n, ex.state, ex.next_seq, p_at;
        RETURN;
    END IF;
    WITH acked AS (
        UPDATE azync_jobs a
        SET state = 'succeeded', completed_at = p_at, lease_until = NULL, updated_at = p_at
        WHERE a.id = ANY(p_job_ids) AND a.state = 'active'
        RETURNING a.kind
    )
    SELECT array_agg(ROW('workflow', k.kind, 0, 1, 0, 0)::azync_job_delta) INTO deltas
    FROM acked k;
    INSERT INTO azync_workflow_history (workflow_id, seq, type, payload, created_at)
    SELECT p_id, p_expected + u.ord - 1, u.type, u.payload, p_at
    FROM unnest(p_types, p_payloads) WITH ORDINALITY AS u(type, payload, ord);
    UPDATE azync_workflow_executions e
    SET next_seq = p_expected + cardinality(p_types), updated_at = p_at,
        awaited_signals = coalesce(p_awaited, e.awaited_signals)
    WHERE e.id = p_id;
    PERFORM azync_workflow_finish(p_id, p_state, p_result, p_reason, p_at, p_channel);
    PERFORM azync_job_count(p_at, deltas);
    RETURN QUERY SELECT true, n, p_state, p_expected + cardinality(p_types), p_at;
END
$$;
