-- +goose Up
-- Edit, then replay (`rmqguard dlq edit`, dlqtool.ReplayEdited): the letter is sent with a body the operator
-- wrote, under the same event ID. The row of such a letter keeps who edited it and when, the letter's body and
-- the body sent; a row with edited_by set is superseded: the letter itself is never replayed (the edited copy
-- is the event's message now). Existing rows are plain replays: edited_by '' and NULL bodies.
ALTER TABLE dlq_replay
  ADD COLUMN edited_by     VARCHAR(255) NOT NULL DEFAULT '' COMMENT 'who edited the body; empty: a plain replay',
  ADD COLUMN edited_at     DATETIME(6)  NULL     COMMENT 'when the edit was claimed, the database UTC clock',
  ADD COLUMN original_body MEDIUMBLOB   NULL     COMMENT 'the letter body as stored in the DLQ',
  ADD COLUMN edited_body   MEDIUMBLOB   NULL     COMMENT 'the body sent instead';

-- +goose Down
ALTER TABLE dlq_replay
  DROP COLUMN edited_body,
  DROP COLUMN original_body,
  DROP COLUMN edited_at,
  DROP COLUMN edited_by;
