-- +goose Up
-- The rest of the example domain: an order belongs to an account and moves WAIT_PAY → PAID | CANCELLED with
-- its version; stock on hand per SKU; accounts with a balance in cents and their transactions keyed by
-- transaction_id (a business unique key, like inventory_change.change_id), so that
-- SUM(account_transaction.amount) = account.balance and inventory.on_hand = SUM(inventory_change.quantity)
-- can be reconciled. Orders written before this migration keep their status 'CREATED' (the OrderCreated-only
-- example's name for a new order); no event moves them, and reconciliation treats them like WAIT_PAY.
ALTER TABLE orders ADD COLUMN account_id VARCHAR(64) NOT NULL DEFAULT '';

ALTER TABLE inventory_change ADD KEY idx_inventory_change_sku (sku_id);

CREATE TABLE IF NOT EXISTS inventory (
  sku_id     VARCHAR(64) NOT NULL PRIMARY KEY,
  on_hand    BIGINT      NOT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS account (
  account_id VARCHAR(64) NOT NULL PRIMARY KEY,
  balance    BIGINT      NOT NULL,
  updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- amount is signed cents: a credit (an opening deposit) is positive, a debit (a captured payment) negative.
-- event_id names the event that recorded the row, '' for rows written outside the consumer (seeds, jobs).
CREATE TABLE IF NOT EXISTS account_transaction (
  transaction_id VARCHAR(128) NOT NULL PRIMARY KEY,
  account_id     VARCHAR(64)  NOT NULL,
  order_no       VARCHAR(64)  NOT NULL DEFAULT '',
  amount         BIGINT       NOT NULL,
  kind           VARCHAR(20)  NOT NULL,
  event_id       VARCHAR(128) NOT NULL DEFAULT '',
  created_at     DATETIME(6)  NOT NULL,
  KEY idx_account_transaction_account (account_id),
  KEY idx_account_transaction_order (order_no),
  KEY idx_account_transaction_event (event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Backfill: the stock of every SKU already reserved is the sum of its changes, so an old demo database
-- reconciles. A row a concurrent writer adds meanwhile is kept (IGNORE: the writer's own upsert wins).
INSERT IGNORE INTO inventory (sku_id, on_hand, updated_at)
  SELECT sku_id, SUM(quantity), UTC_TIMESTAMP(6) FROM inventory_change GROUP BY sku_id;

-- +goose Down
DROP TABLE IF EXISTS account_transaction;
DROP TABLE IF EXISTS account;
DROP TABLE IF EXISTS inventory;
ALTER TABLE inventory_change DROP KEY idx_inventory_change_sku;
ALTER TABLE orders DROP COLUMN account_id;
