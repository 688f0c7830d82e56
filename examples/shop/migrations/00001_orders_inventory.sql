-- +goose Up
-- The example domain of chapter 13: orders, and inventory changes keyed by change_id (13.5), so that a
-- repeated reservation cannot reduce stock twice even outside the dedup table.
CREATE TABLE IF NOT EXISTS orders (
  order_no   VARCHAR(64)  NOT NULL PRIMARY KEY,
  sku_id     VARCHAR(64)  NOT NULL,
  quantity   INT          NOT NULL,
  amount_cents BIGINT     NOT NULL,
  status     VARCHAR(20)  NOT NULL,
  version    BIGINT       NOT NULL,
  created_at DATETIME(6)  NOT NULL,
  updated_at DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS inventory_change (
  change_id  VARCHAR(128) NOT NULL PRIMARY KEY,
  sku_id     VARCHAR(64)  NOT NULL,
  order_no   VARCHAR(64)  NOT NULL,
  quantity   INT          NOT NULL,
  created_at DATETIME(6)  NOT NULL,
  KEY idx_inventory_change_order (order_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS inventory_change;
DROP TABLE IF EXISTS orders;
