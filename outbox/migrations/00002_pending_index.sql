-- +goose Up
-- The relay's claim reads pending rows in id order through this index (queries.go: FORCE INDEX) and stops
-- at its limit, so a round costs what it claims, not the size of the backlog.
CREATE INDEX idx_outbox_pending ON {{.Outbox}} (status, id);

-- +goose Down
DROP INDEX idx_outbox_pending ON {{.Outbox}};
