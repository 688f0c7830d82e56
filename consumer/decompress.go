package consumer

import (
	"context"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/causelabel"
)

// decompressing wraps h so that the chain sees every body decompressed: a body still compressed
// (body.StoredCompression: an LZ4 or ZSTD body from a Java 5.x producer, which the Go client passes on as
// stored) is decoded by zd, the consumer's one decoder, into d.Msg.Body, the compressed flag is cleared on
// d.Msg.SysFlag (the codec bits stay, as the Java client leaves them) and body.PropSysFlag is removed,
// before h runs. A body
// that cannot be decoded never reaches h: it is dead-lettered at once (KindDeadLetter, "permanent",
// never retried: no redelivery decodes it better) with the reason "unsupported compression …" or
// "corrupt compressed body …", and its dead letter keeps the compressed body and the flag
// (its letter sets body.PropSysFlag).
func decompressing(h Handler, zd *body.Decoder) Handler {
	return HandlerFunc(func(ctx context.Context, d *Delivery) (Outcome, error) {
		decodedBody, decoded, err := zd.Decode(d.Msg)
		if err != nil {
			return undecodable(err), err
		}
		if decoded {
			d.Msg.Body = decodedBody
			d.Msg.SysFlag &^= body.SysFlagCompressed
			d.Msg.RemoveProperty(body.PropSysFlag)
		}
		return h.Handle(ctx, d)
	})
}

// undecodable is the outcome of a body the decoder refused: a dead letter whose reason is err's text
// ("unsupported compression (type 5, SysFlag 1281): …" or "corrupt compressed body (lz4, …): …").
func undecodable(err error) Outcome {
	o := DeadLetter(err.Error())
	o.Cause = causelabel.Permanent
	return o
}
