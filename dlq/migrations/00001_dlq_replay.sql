-- +goose Up
-- The replay audit of `rmqguard dlq replay`: one row per (consumer group, DLQ letter) replayed. A replay
-- claims the row (INSERT; the primary key settles two replays running at once) before it sends, then sets
-- status to 'sent' or 'failed'. A row left 'sending' means a replay stopped between claim and send result:
-- the letter may have been sent, so later replays skip it unless forced.
CREATE TABLE IF NOT EXISTS dlq_replay (
  consumer_group VARCHAR(255)  NOT NULL,
  dlq_store_id   VARCHAR(64)   NOT NULL COMMENT 'broker store ID (offset message ID) of the letter',
  replay_id      VARCHAR(64)   NOT NULL COMMENT 'the replay run that claimed the row last',
  dlq_msg_id     VARCHAR(64)   NOT NULL DEFAULT '',
  event_id       VARCHAR(128)  NOT NULL DEFAULT '',
  origin_topic   VARCHAR(255)  NOT NULL DEFAULT '',
  target_topic   VARCHAR(255)  NOT NULL DEFAULT '',
  sent_msg_id    VARCHAR(64)   NOT NULL DEFAULT '',
  status         VARCHAR(16)   NOT NULL COMMENT 'sending, sent or failed',
  error          VARCHAR(1024) NOT NULL DEFAULT '',
  claims         INT UNSIGNED  NOT NULL DEFAULT 1 COMMENT 'how many replays claimed it (retries, --force)',
  replayed_at    DATETIME(6)   NOT NULL COMMENT 'last claim, the database UTC clock',
  replayed_by    VARCHAR(255)  NOT NULL DEFAULT '',
  PRIMARY KEY (consumer_group, dlq_store_id),
  KEY idx_dlq_replay_event (consumer_group, event_id),
  KEY idx_dlq_replay_replay_id (replay_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS dlq_replay;
