-- +goose Up
-- Purge deletes the oldest rows of one dedup scope (consumer_group) by consumed_at: this index lets it find
-- them in key order without scanning other scopes. It replaces the index on consumed_at alone, which no query
-- uses, so a claim still maintains one secondary index.
ALTER TABLE {{.Processed}}
  ADD KEY idx_processed_event_group_consumed_at (consumer_group, consumed_at),
  DROP KEY idx_processed_event_consumed_at;

-- +goose Down
ALTER TABLE {{.Processed}}
  ADD KEY idx_processed_event_consumed_at (consumed_at),
  DROP KEY idx_processed_event_group_consumed_at;
