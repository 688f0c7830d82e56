package body

import (
	"fmt"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/klauspost/compress/zstd"
)

// Decoder decodes bodies as Decode does with one ZSTD decoder shared by all its callers (a Consumer's
// consume goroutines), built on the first ZSTD body and freed by Close; a body decoded after Close gets a
// decoder of its own, so a late delivery is never dead-lettered because the consumer is stopping. The
// zero value is ready to use; it is safe for concurrent use.
type Decoder struct {
	mu     sync.RWMutex // read-held by decode while it uses dec; close must not free dec under it
	dec    *zstd.Decoder
	closed bool
}

// maxZSTDWindow is the largest window a ZSTD frame may declare: 128 MiB (window log 27), the default
// limit of the reference decoder. The Java client's ZSTD compressor streams without a content size, so
// its frames declare the window of their level, not of the body: 128 MiB at level 22 for a body of a few
// KB. DecodeAll decodes into the output, so a large declared window costs no memory of its own.
const maxZSTDWindow = 128 << 20

// newZSTDDecoder builds a decoder for DecodeAll: up to GOMAXPROCS decodes at once (more would only
// queue for the CPUs), a window of at most maxZSTDWindow (zstd.ErrWindowSizeExceeded), and at most
// maxZSTDWindow decoded bytes, the decoder's own limit, which it cannot set below the window; limitZSTD
// then refuses anything over MaxDecoded. So a hostile frame is refused instead of allocating
// gigabytes. Used only with DecodeAll (no stream), it starts no goroutines.
func newZSTDDecoder() (*zstd.Decoder, error) {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxZSTDWindow), zstd.WithDecoderMaxWindow(maxZSTDWindow))
	if err != nil {
		return nil, fmt.Errorf("new zstd decoder: %w", err)
	}
	return d, nil
}

// limitZSTD returns DecodeAll's result, or an error wrapping zstd.ErrDecoderSizeExceeded when the body
// decoded to more than MaxDecoded bytes.
func limitZSTD(out []byte, err error) ([]byte, error) {
	if err == nil && len(out) > MaxDecoded {
		return nil, fmt.Errorf("decoded body exceeds %d bytes: %w", MaxDecoded, zstd.ErrDecoderSizeExceeded)
	}
	return out, err
}

// decodeZSTDOnce decodes body with a decoder built for it alone.
func decodeZSTDOnce(body []byte) ([]byte, error) {
	d, err := newZSTDDecoder()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return limitZSTD(d.DecodeAll(body, nil))
}

// Decode is the package's Decode with the shared ZSTD decoder.
func (z *Decoder) Decode(msg *primitive.MessageExt) (body []byte, decoded bool, err error) {
	return decode(msg, z.zstd)
}

// zstd decodes a whole ZSTD body with the shared decoder, building it on first use.
func (z *Decoder) zstd(body []byte) ([]byte, error) {
	z.mu.RLock()
	if z.dec != nil {
		defer z.mu.RUnlock()
		return limitZSTD(z.dec.DecodeAll(body, nil))
	}
	closed := z.closed
	z.mu.RUnlock()
	if closed {
		return decodeZSTDOnce(body)
	}
	z.mu.Lock()
	if z.dec == nil && !z.closed {
		d, err := newZSTDDecoder()
		if err != nil {
			z.mu.Unlock()
			return nil, err
		}
		z.dec = d
	}
	z.mu.Unlock()
	return z.zstd(body)
}

// Close frees the shared decoder; it waits for decodes in progress. Calling it twice is safe.
func (z *Decoder) Close() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.closed = true
	if z.dec != nil {
		z.dec.Close()
		z.dec = nil
	}
}
