package consumer

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdDecoder is the one ZSTD decoder of a Consumer, shared by its consume goroutines: zstd.Decoder's
// DecodeAll is safe for concurrent use, and building a decoder per message costs more than decoding a
// small body. It is created on the first ZSTD body (a consumer that never sees one builds nothing) and
// closed by close, in Shutdown. A body decoded after close gets a decoder of its own, so a late
// delivery is never dead-lettered because the consumer is stopping. The zero value is ready to use.
type zstdDecoder struct {
	mu     sync.RWMutex // read-held by decode while it uses dec; close must not free dec under it
	dec    *zstd.Decoder
	closed bool
}

// newZSTDDecoder builds a decoder for DecodeAll: up to GOMAXPROCS decodes at once (more would only
// queue for the CPUs), and at most MaxDecodedBody decoded bytes and window, so that a hostile frame is
// refused (zstd.ErrDecoderSizeExceeded, zstd.ErrWindowSizeExceeded) instead of allocating gigabytes.
// Used only with DecodeAll (no stream), it starts no goroutines.
func newZSTDDecoder() (*zstd.Decoder, error) {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxDecodedBody), zstd.WithDecoderMaxWindow(MaxDecodedBody))
	if err != nil {
		return nil, fmt.Errorf("new zstd decoder: %w", err)
	}
	return d, nil
}

// decodeZSTDOnce decodes body with a decoder built for it alone.
func decodeZSTDOnce(body []byte) ([]byte, error) {
	d, err := newZSTDDecoder()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.DecodeAll(body, nil)
}

// decode decodes a whole ZSTD body with the shared decoder, building it on first use.
func (z *zstdDecoder) decode(body []byte) ([]byte, error) {
	z.mu.RLock()
	if z.dec != nil {
		defer z.mu.RUnlock()
		return z.dec.DecodeAll(body, nil)
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
	return z.decode(body)
}

// close frees the shared decoder; it waits for decodes in progress. Calling it twice is safe.
func (z *zstdDecoder) close() {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.closed = true
	if z.dec != nil {
		z.dec.Close()
		z.dec = nil
	}
}
