package body_test

import (
	"bytes"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

func TestZSTD_SharedDecoderDecodesConcurrentlyAndAfterClose(t *testing.T) {
	big := bytes.Repeat(plainOrder, 64)
	frame := testenv.JavaCompressed(t, body.SysFlagZSTD, big)
	var z body.Decoder
	var wg sync.WaitGroup
	got := make([][]byte, 16)
	errs := make([]error, 16)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = z.DecodeZSTD(frame) })
	}
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i], "decode %d", i)
		assert.Equal(t, big, got[i], "decode %d", i)
	}
	z.Close()
	z.Close()
	after, err := z.DecodeZSTD(frame)
	require.NoError(t, err, "a body decoded after Close gets a decoder of its own, never a dead letter")
	assert.Equal(t, big, after)
}

func TestZSTD_FrameLargerThanTheLimitIsRefusedAsCorrupt(t *testing.T) {
	frame := testenv.JavaCompressed(t, body.SysFlagZSTD, make([]byte, body.MaxDecoded+1)) // zeros: a few KB on the wire
	var z body.Decoder
	defer z.Close()
	_, err := z.DecodeZSTD(frame)
	require.ErrorIs(t, err, zstd.ErrDecoderSizeExceeded)
	_, _, err = body.Decode(storedMsg(frame, body.SysFlagCompressed|body.SysFlagZSTD))
	require.ErrorIs(t, err, body.ErrCorruptCompressedBody)
	require.ErrorIs(t, err, zstd.ErrDecoderSizeExceeded)
}

// A body of exactly MaxDecoded bytes is still decoded: the limit refuses only what is larger.
func TestZSTD_BodyOfExactlyTheLimitDecodes(t *testing.T) {
	b := make([]byte, body.MaxDecoded)
	var z body.Decoder
	defer z.Close()
	out, err := z.DecodeZSTD(testenv.JavaCompressed(t, body.SysFlagZSTD, b))
	require.NoError(t, err)
	require.Len(t, out, body.MaxDecoded)
}

// Close while decodes are in flight (Shutdown while late deliveries decode): Close waits for the decodes
// that hold the shared decoder, and a decode that starts after it gets a decoder of its own; every decode
// succeeds and -race finds no use of a freed decoder.
func TestZSTD_SharedDecoderClosedDuringDecodes(t *testing.T) {
	big := bytes.Repeat(plainOrder, 64)
	frame := testenv.JavaCompressed(t, body.SysFlagZSTD, big)
	for range 20 {
		var z body.Decoder
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 10 {
					out, err := z.DecodeZSTD(frame)
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
func TestZSTD_FramesTogetherLargerThanTheLimitAreRefused(t *testing.T) {
	half := testenv.JavaCompressed(t, body.SysFlagZSTD, make([]byte, body.MaxDecoded/2+1))
	b := append(append([]byte{}, half...), half...)
	var z body.Decoder
	defer z.Close()
	_, err := z.DecodeZSTD(b)
	require.ErrorIs(t, err, zstd.ErrDecoderSizeExceeded)
}

// javaZSTDLevel22 is what the Java client's ZSTD compressor (rocketmq-common 5.3.3, zstd-jni 1.5.2-2)
// writes for javaZSTDBody at level 22: a frame without content size that declares a 128 MiB window.
var javaZSTDLevel22 = []byte("\x28\xb5\x2f\xfd\x00\x88\x14\x01\x00\xd0\x61\x68\x6f\x76\x63\x6a\x71\x78\x65" +
	"\x6c\x73\x7a\x67\x6e\x75\x62\x69\x70\x77\x64\x6b\x72\x79\x66\x6d\x74\x01\x00\xae\x4d\xf7\x73\x0c\x01\x00\x00")

// javaZSTDBody is the 5,000-byte body javaZSTDLevel22 compresses: byte i is 'a' + (7i mod 26).
func javaZSTDBody() []byte {
	b := make([]byte, 5000)
	for i := range b {
		b[i] = byte('a' + i*7%26)
	}
	return b
}

// A Java producer sets its level with setCompressLevel or rocketmq.message.compressLevel; at level 22 its
// compressor writes a frame that declares a 128 MiB window whatever the body's size, which the reference
// decoder accepts by default. It decodes, with the shared decoder and with Decode, instead of being
// dead-lettered as "window size exceeded".
func TestZSTD_JavaLevel22FrameWithA128MiBWindowDecodes(t *testing.T) {
	require.Equal(t, byte(0x88), javaZSTDLevel22[5], "window descriptor: 2^27 bytes")
	var z body.Decoder
	defer z.Close()
	out, err := z.DecodeZSTD(javaZSTDLevel22)
	require.NoError(t, err)
	assert.Equal(t, javaZSTDBody(), out)
	out, decoded, err := body.Decode(storedMsg(javaZSTDLevel22, body.SysFlagCompressed|body.SysFlagZSTD))
	require.NoError(t, err)
	assert.True(t, decoded)
	assert.Equal(t, javaZSTDBody(), out)
}

// BenchmarkDecodeZSTD measures the decode of a ~5 KB ZSTD body (over the Java client's 4 KB threshold)
// with the consumer's shared decoder, as every ZSTD delivery pays it.
func BenchmarkDecodeZSTD(b *testing.B) {
	big := bytes.Repeat(plainOrder, 64)
	frame := testenv.JavaCompressed(b, body.SysFlagZSTD, big)
	var z body.Decoder
	defer z.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := z.DecodeZSTD(frame); err != nil {
			b.Fatal(err)
		}
	}
}
