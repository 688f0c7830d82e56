// Package dupcause names why a duplicate came again from the message ID its event was processed from,
// for the dedup store (a processed_event row's msg_id) and the Redis fast path (a done key's value).
package dupcause

import (
	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/causelabel"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// Of is the cause of duplicate d whose event was processed from the message storedMsgID:
// "redelivery" when it is d's message ID, "replay" when d carries replay
// provenance, "resend" otherwise.
func Of(storedMsgID string, d *consumer.Delivery) string {
	switch {
	case storedMsgID == d.Msg.MsgId:
		return causelabel.Redelivery
	case d.Msg.GetProperty(letter.PropReplayID) != "":
		return causelabel.Replay
	default:
		return causelabel.Resend
	}
}
