-- +goose Up
-- The relay's cost per row: each secondary index whose key holds the status changes twice (an entry
-- out, an entry in) when a row is marked sent, and each is one more entry per Send. The claim now asks
-- only whether the row before it of its sharding key (id order) is sent (queries.go), a lookup of
-- idx_outbox_key, which no status change touches; and Purge walks sent rows through idx_outbox_pending
-- (status, id) in id order. idx_outbox_pending stays the only index that holds the status.
CREATE INDEX idx_outbox_key ON {{.Outbox}} (sharding_key, id);
DROP INDEX idx_outbox_status_key ON {{.Outbox}};
DROP INDEX idx_outbox_sent_at ON {{.Outbox}};

-- +goose Down
CREATE INDEX idx_outbox_sent_at ON {{.Outbox}} (status, sent_at);
CREATE INDEX idx_outbox_status_key ON {{.Outbox}} (status, sharding_key, id);
DROP INDEX idx_outbox_key ON {{.Outbox}};
