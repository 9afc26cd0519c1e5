-- The signal names a running execution's last pass left it blocked on
-- (ctx.wait_signal). With no live job and no unfired timer, an execution
-- waiting on a signal is healthy; one waiting on nothing is stalled.
ALTER TABLE azync_workflow_executions
    ADD COLUMN awaited_signals text[] NOT NULL DEFAULT '{}';
