-- +goose Up
-- A PaymentCaptured re-sent under a new event ID finds its payment already recorded (account_transaction
-- keeps the event ID of the first) and commits its dedup row as SUCCESS without a write of its own; this
-- table links such an event to the transaction, so that reconciliation finds the payment of every
-- processed PaymentCaptured. Written only on that path (the first event is account_transaction.event_id).
CREATE TABLE IF NOT EXISTS account_transaction_event (
  event_id       VARCHAR(128) NOT NULL PRIMARY KEY,
  transaction_id VARCHAR(128) NOT NULL,
  created_at     DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS account_transaction_event;
