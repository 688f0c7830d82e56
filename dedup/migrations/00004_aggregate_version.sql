-- +goose Up
-- dedup.Migrate renders this file as a Go text/template: the table is aggregate_version, or its name with
-- dedup.WithTablePrefix (validated: lowercase letters, digits and '_').
-- The stored version of each aggregate, per dedup scope (consumer_group) and aggregate type, kept by
-- middleware.Version when no user loader reads the version from the aggregate's own table. An event is
-- applied only when its version is the stored one plus one; the row moves forward in the same local
-- transaction as the event's processed_event row and business writes, so a rollback leaves it where it was.
-- event_id names the event that set the version. Key columns compare bytes exactly, like processed_event.
CREATE TABLE IF NOT EXISTS {{.Aggregate}} (
  consumer_group VARCHAR(255) NOT NULL,
  aggregate_type VARCHAR(64)  NOT NULL,
  aggregate_id   VARCHAR(128) NOT NULL,
  version        BIGINT       NOT NULL,
  event_id       VARCHAR(128) NOT NULL,
  updated_at     DATETIME(6)  NOT NULL,
  PRIMARY KEY (consumer_group, aggregate_type, aggregate_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.Aggregate}};
