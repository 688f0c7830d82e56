-- +goose Up
-- dedup.Migrate renders this file as a Go text/template: the table is processed_event, or its name with
-- dedup.WithTablePrefix (validated: lowercase letters, digits and '_').
-- One row per business event that a consumer group has processed: the idempotency record.
-- The key is (consumer_group, event_id): the same event is processed once per consumer group, and two
-- groups (say, inventory and accounting) each process it once. The row is inserted in the same local
-- transaction as the handler's business writes, so a rollback releases the key.
CREATE TABLE IF NOT EXISTS {{.Processed}} (
  consumer_group VARCHAR(128) NOT NULL,
  event_id       VARCHAR(128) NOT NULL,
  event_type     VARCHAR(64)  NOT NULL DEFAULT '',
  aggregate_id   VARCHAR(128) NOT NULL DEFAULT '',
  topic          VARCHAR(255) NOT NULL,
  msg_id         VARCHAR(64)  NOT NULL,
  consumed_at    DATETIME(6)  NOT NULL,
  result_status  VARCHAR(20)  NOT NULL,
  PRIMARY KEY (consumer_group, event_id),
  KEY idx_processed_event_consumed_at (consumed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.Processed}};
