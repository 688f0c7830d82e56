-- +goose Up
-- dedup.Migrate renders this file as a Go text/template: the table is event_lease, or its name with
-- dedup.WithTablePrefix (validated: lowercase letters, digits and '_').
-- Lease mode (middleware.Lease): one row per event whose handler is running or died while running. The row
-- is committed before the handler runs (a claim with a lease, lease_until on the database's UTC clock) and
-- deleted by the handler's own transaction, which commits it with the processed_event row and the business
-- writes; a delivery that finds a live lease is retried later, one that finds an expired lease takes it over
-- by a conditional UPDATE (takeovers counts them). Key columns compare bytes exactly, like processed_event.
CREATE TABLE IF NOT EXISTS {{.Lease}} (
  consumer_group VARCHAR(255) NOT NULL,
  event_id       VARCHAR(128) NOT NULL,
  claim_token    CHAR(32)     NOT NULL,
  msg_id         VARCHAR(64)  NOT NULL,
  claimed_at     DATETIME(6)  NOT NULL,
  lease_until    DATETIME(6)  NOT NULL,
  takeovers      INT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (consumer_group, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.Lease}};
