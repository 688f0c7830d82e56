-- +goose Up
-- Loyalty points: a paid order's LoyaltyPointsCredited event (sent through the outbox by the OrderPaid
-- handler) credits its account once. loyalty_credit holds one row per credited order (credit_id
-- "loyalty:<order>", the business key) with the event that applied it; loyalty_account the points.
CREATE TABLE IF NOT EXISTS loyalty_credit (
  credit_id  VARCHAR(128) NOT NULL PRIMARY KEY,
  account_id VARCHAR(64)  NOT NULL,
  order_no   VARCHAR(64)  NOT NULL,
  points     BIGINT       NOT NULL,
  event_id   VARCHAR(128) NOT NULL,
  created_at DATETIME(6)  NOT NULL,
  KEY idx_loyalty_credit_account (account_id),
  KEY idx_loyalty_credit_order (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS loyalty_account (
  account_id VARCHAR(64) NOT NULL PRIMARY KEY,
  points     BIGINT      NOT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS loyalty_account;
DROP TABLE IF EXISTS loyalty_credit;
