-- +goose Up
-- consumer_group as long as RocketMQ allows group names (255).
-- claim_token: a random value written by the transaction that claims the event, so that the transaction can
-- check before committing that the row it sees is its own, not one a concurrent duplicate committed after
-- a deadlock rolled this transaction back.
ALTER TABLE {{.Processed}}
  MODIFY consumer_group VARCHAR(255) NOT NULL,
  ADD COLUMN claim_token CHAR(32) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE {{.Processed}}
  DROP COLUMN claim_token,
  MODIFY consumer_group VARCHAR(128) NOT NULL;
