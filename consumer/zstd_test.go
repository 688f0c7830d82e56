package consumer_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

func TestIssue9Item8_SharedZSTDDecoderDecodesConcurrentlyAndAfterClose(t *testing.T) {
	big := bytes.Repeat(plainOrder, 64)
	frame := zstdJava(t, big)
	var z consumer.ZSTDDecoder
	var wg sync.WaitGroup
	got := make([][]byte, 16)
	errs := make([]error, 16)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = z.Decode(frame) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i], "decode %d", i)
		assert.Equal(t, big, got[i], "decode %d", i)
	}
	z.Close()
	z.Close()
	after, err := z.Decode(frame)
	require.NoError(t, err, "a body decoded after Close gets a decoder of its own, never a dead letter")
	assert.Equal(t, big, after)
}

func TestIssue9Item8_ZSTDFrameLargerThanTheLimitIsRefusedAsCorrupt(t *testing.T) {
	frame := zstdJava(t, make([]byte, consumer.MaxDecodedBody+1)) // zeros: a few KB on the wire
	var z consumer.ZSTDDecoder
	defer z.Close()
	_, err := z.Decode(frame)
	require.ErrorIs(t, err, zstd.ErrDecoderSizeExceeded)
	_, _, err = consumer.DecodeBody(storedMsg(frame, consumer.SysFlagCompressed|consumer.SysFlagZSTD))
	require.ErrorIs(t, err, consumer.ErrCorruptCompressedBody)
	require.ErrorIs(t, err, zstd.ErrDecoderSizeExceeded)
}

// Close while decodes are in flight (Shutdown while late deliveries decode): Close waits for the decodes
// that hold the shared decoder, and a decode that starts after it gets a decoder of its own; every decode
// succeeds and -race finds no use of a freed decoder.
func TestIssue9Item8_SharedZSTDDecoderClosedDuringDecodes(t *testing.T) {
	big := bytes.Repeat(plainOrder, 64)
	frame := zstdJava(t, big)
	for range 20 {
		var z consumer.ZSTDDecoder
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 10 {
					out, err := z.Decode(frame)
					if !assert.NoError(t, err) || !assert.Equal(t, big, out) {
						return
					}
				}
			})
		}
		wg.Go(z.Close)
		wg.Wait()
	}
}

// The limit is on the whole body, not per frame: two frames of just over half the limit each (a body
// may hold several concatenated frames) are refused.
func TestIssue9Item8_ZSTDFramesTogetherLargerThanTheLimitAreRefused(t *testing.T) {
	half := zstdJava(t, make([]byte, consumer.MaxDecodedBody/2+1))
	body := append(append([]byte{}, half...), half...)
	var z consumer.ZSTDDecoder
	defer z.Close()
	_, err := z.Decode(body)
	require.ErrorIs(t, err, zstd.ErrDecoderSizeExceeded)
}

// BenchmarkDecodeZSTD measures the decode of a ~5 KB ZSTD body (over the Java client's 4 KB threshold)
// with the consumer's shared decoder, as every ZSTD delivery pays it.
func BenchmarkDecodeZSTD(b *testing.B) {
	big := bytes.Repeat(plainOrder, 64)
	frame := zstdJava(b, big)
	var z consumer.ZSTDDecoder
	defer z.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := z.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}
