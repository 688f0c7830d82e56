package consumer

import "context"

// decompressing wraps h so that the chain sees every body decompressed: a body still compressed
// (StoredCompression: an LZ4 or ZSTD body from a Java 5.x producer, which the Go client passes on as
// stored) is decoded as DecodeBody does (ZSTD with zd, the consumer's one decoder) into d.Msg.Body, the
// compressed flag is cleared on d.Msg.SysFlag (the codec bits stay, as the Java client leaves them) and
// PropBodySysFlag is removed, before h runs. A body
// that cannot be decoded never reaches h: it is dead-lettered at once (KindDeadLetter, CausePermanent,
// never retried: no redelivery decodes it better) with the reason "unsupported compression …" or
// "corrupt compressed body …", and its dead letter keeps the compressed body and the flag
// (DeadLetterMessage sets PropBodySysFlag).
func decompressing(h Handler, zd *zstdDecoder) Handler {
	return func(ctx context.Context, d *Delivery) (Outcome, error) {
		body, decoded, err := decodeBody(d.Msg, zd.decode)
		if err != nil {
			return undecodable(err), err
		}
		if decoded {
			d.Msg.Body = body
			d.Msg.SysFlag &^= SysFlagCompressed
			d.Msg.RemoveProperty(PropBodySysFlag)
		}
		return h(ctx, d)
	}
}

// undecodable is the outcome of a body DecodeBody refused: a dead letter whose reason is err's text
// ("unsupported compression (type 5, SysFlag 1281): …" or "corrupt compressed body (lz4, …): …").
func undecodable(err error) Outcome {
	o := DeadLetter(err.Error())
	o.Cause = CausePermanent
	return o
}
