-- +goose Up
-- outbox.Migrate renders this file as a Go text/template: the table is rmqguard_outbox, or its name with the
-- dedup table prefix. One row per outgoing message (kind 'message') or durable effect (kind 'effect'),
-- inserted in the dedup transaction of the event that caused it; the relay sends or runs it after COMMIT.
-- id is the order of the rows of one sharding key; a key's rows go out one after the other, oldest first.
CREATE TABLE IF NOT EXISTS {{.Outbox}} (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  kind            VARCHAR(8)    NOT NULL,
  event_id        VARCHAR(128)  NOT NULL,
  source_event_id VARCHAR(128)  NOT NULL,
  scope           VARCHAR(128)  NOT NULL,
  name            VARCHAR(64)   NOT NULL,
  sharding_key    VARCHAR(128)  NOT NULL,
  topic           VARCHAR(255)  NOT NULL DEFAULT '',
  tag             VARCHAR(255)  NOT NULL DEFAULT '',
  msg_keys        VARCHAR(1024) NOT NULL DEFAULT '',
  properties      TEXT          NULL,
  body            MEDIUMBLOB    NOT NULL,
  status          VARCHAR(8)    NOT NULL DEFAULT 'pending',
  attempts        INT           NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(6)   NOT NULL,
  last_error      VARCHAR(1024) NOT NULL DEFAULT '',
  created_at      DATETIME(6)   NOT NULL,
  sent_at         DATETIME(6)   NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_outbox_event (kind, event_id),
  KEY idx_outbox_status_key (status, sharding_key, id),
  KEY idx_outbox_sent_at (status, sent_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS {{.Outbox}};
