// Package dupcause names why a duplicate came again from the message ID its event was processed from,
// for the dedup store (a processed_event row's msg_id) and the Redis fast path (a done key's value).
package dupcause

import (
	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/letter"
)

// Of is the cause of duplicate d whose event was processed from the message storedMsgID:
// consumer.CauseRedelivery when it is d's message ID, consumer.CauseReplay when d carries replay
// provenance, consumer.CauseResend otherwise.
func Of(storedMsgID string, d *consumer.Delivery) consumer.Cause {
	switch {
	case storedMsgID == d.Msg.MsgId:
		return consumer.CauseRedelivery
	case d.Msg.GetProperty(letter.PropReplayID) != "":
		return consumer.CauseReplay
	default:
		return consumer.CauseResend
	}
}
