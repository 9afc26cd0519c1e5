-- Maintenance leadership as a lease on the backend clock (one row per
-- leadership name). A row is never deleted: a takeover increments `term`,
-- which fences the maintenance writes of every earlier holder.
CREATE TABLE azync_leaders (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    term        bigint NOT NULL,
    elected_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
