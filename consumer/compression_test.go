package consumer_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"hash/crc32"
	"strconv"
	"testing"

	rmq "github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
)

var plainOrder = []byte(`{"eventId":"e-1","orderNo":"O-1","note":"zwölf Bücher, 十二本"}`)

// lz4Java frames body as the Java client's Lz4Compressor does (lz4-java LZ4FrameOutputStream defaults:
// LZ4 frame format, independent 4 MB blocks, no content checksum).
func lz4Java(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := lz4.NewWriter(&buf)
	require.NoError(t, w.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(false)))
	_, err := w.Write(body)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, []byte{0x04, 0x22, 0x4d, 0x18}, buf.Bytes()[:4], "LZ4 frame magic")
	return buf.Bytes()
}

// zstdJava frames body as the Java client's ZstdCompressor does (zstd-jni ZstdOutputStream: one
// streamed Zstandard frame, no checksum).
func zstdJava(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = w.Write(body)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Equal(t, []byte{0x28, 0xb5, 0x2f, 0xfd}, buf.Bytes()[:4], "Zstandard frame magic")
	return buf.Bytes()
}

// zlibJava compresses body as the Java client's ZlibCompressor does (DeflaterOutputStream: RFC 1950).
func zlibJava(t testing.TB, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zlib.NewWriterLevel(&buf, 5)
	require.NoError(t, err)
	_, err = w.Write(body)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// storedMsg is a message as the Go client hands it over when it did not inflate the body: the stored
// bytes, the broker's 31-bit CRC of them, and sysFlag.
func storedMsg(body []byte, sysFlag int32) *primitive.MessageExt {
	m := orderMsg("c-1")
	m.Body = body
	m.SysFlag = sysFlag
	m.BodyCRC = int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
	return m
}

func TestCompression_JavaLZ4AndZSTDBodiesAreDecodedByTheirCodecBits(t *testing.T) {
	for name, tc := range map[string]struct {
		flag int32
		body []byte
	}{
		"lz4":  {consumer.SysFlagCompressed | consumer.SysFlagLZ4, lz4Java(t, plainOrder)},
		"zstd": {consumer.SysFlagCompressed | consumer.SysFlagZSTD, zstdJava(t, plainOrder)},
	} {
		t.Run(name, func(t *testing.T) {
			body, decoded, err := consumer.DecodeBody(storedMsg(tc.body, tc.flag))
			require.NoError(t, err)
			assert.True(t, decoded)
			assert.Equal(t, plainOrder, body)
			assert.Equal(t, name, consumer.CompressionName(tc.flag))
		})
	}
}

func TestCompression_ZlibInflatedByTheClientIsLeftAlone(t *testing.T) {
	for _, flag := range []int32{consumer.SysFlagCompressed, consumer.SysFlagCompressed | consumer.SysFlagZlib} {
		// The client inflated it: the body no longer matches the stored body's CRC.
		m := storedMsg(zlibJava(t, plainOrder), flag)
		m.Body = plainOrder
		body, decoded, err := consumer.DecodeBody(m)
		require.NoError(t, err)
		assert.False(t, decoded, "SysFlag %d", flag)
		assert.Equal(t, plainOrder, body)
		assert.Zero(t, consumer.StoredCompression(m))
	}
}

func TestCompression_ZlibTheClientCouldNotInflateIsCorrupt(t *testing.T) {
	stored := zlibJava(t, plainOrder)
	stored[len(stored)/2] ^= 0xff // the client's inflate failed and passed the stored bytes on
	_, _, err := consumer.DecodeBody(storedMsg(stored, consumer.SysFlagCompressed|consumer.SysFlagZlib))
	require.ErrorIs(t, err, consumer.ErrCorruptCompressedBody)
	assert.Contains(t, err.Error(), "corrupt compressed body (zlib, SysFlag 769)")
}

func TestCompression_UnknownCodecBitsAreUnsupported(t *testing.T) {
	flag := consumer.SysFlagCompressed | 5<<8
	_, _, err := consumer.DecodeBody(storedMsg([]byte("\x01\x02\x03"), flag))
	require.ErrorIs(t, err, consumer.ErrUnsupportedCompression)
	assert.Contains(t, err.Error(), "unsupported compression (type 5, SysFlag 1281)")
}

func TestCompression_CorruptLZ4AndZSTDFramesAreCorrupt(t *testing.T) {
	lz := lz4Java(t, plainOrder)
	zs := zstdJava(t, plainOrder)
	for name, m := range map[string]*primitive.MessageExt{
		"lz4 truncated":  storedMsg(lz[:len(lz)-6], consumer.SysFlagCompressed|consumer.SysFlagLZ4),
		"zstd truncated": storedMsg(zs[:len(zs)-4], consumer.SysFlagCompressed|consumer.SysFlagZSTD),
		"lz4 plain text": storedMsg(plainOrder, consumer.SysFlagCompressed|consumer.SysFlagLZ4),
	} {
		_, _, err := consumer.DecodeBody(m)
		require.ErrorIs(t, err, consumer.ErrCorruptCompressedBody, name)
	}
}

func TestCompression_PlainBodiesAreNotTouched(t *testing.T) {
	m := storedMsg(plainOrder, 0)
	body, decoded, err := consumer.DecodeBody(m)
	require.NoError(t, err)
	assert.False(t, decoded)
	assert.Equal(t, plainOrder, body)
}

func TestCompression_AReplayedLetterIsDecodedByItsBodySysFlagProperty(t *testing.T) {
	// A letter sent by the Go producer has no codec bits; PropBodySysFlag carries them.
	m := storedMsg(lz4Java(t, plainOrder), 0)
	m.WithProperty(consumer.PropBodySysFlag, strconv.Itoa(int(consumer.SysFlagCompressed|consumer.SysFlagLZ4)))
	body, decoded, err := consumer.DecodeBody(m)
	require.NoError(t, err)
	assert.True(t, decoded)
	assert.Equal(t, plainOrder, body)
}

func TestCompression_TheChainSeesTheDecodedBodyAndNoCompressedFlag(t *testing.T) {
	var seen []byte
	var flag int32
	h := func(_ context.Context, d *consumer.Delivery) (consumer.Outcome, error) {
		seen, flag = d.Msg.Body, d.Msg.SysFlag
		return consumer.Processed(), nil
	}
	_, fp := newConsumer(t, validConfig(), h)
	res, _ := fp.deliver(t, "ORDER", storedMsg(zstdJava(t, plainOrder), consumer.SysFlagCompressed|consumer.SysFlagZSTD))
	assert.Equal(t, rmq.ConsumeSuccess, res)
	assert.Equal(t, plainOrder, seen)
	assert.Equal(t, consumer.SysFlagZSTD, flag, "the compressed flag is cleared, the codec bits stay (as the Java client does)")
}

func TestCompression_AnUnsupportedCodecIsDeadLetteredAtOnceWithTheFlagKept(t *testing.T) {
	called := false
	h := func(context.Context, *consumer.Delivery) (consumer.Outcome, error) {
		called = true
		return consumer.Processed(), nil
	}
	// Alone, without a sink: the broker's own DLQ (DelayLevelDLQ) keeps body and SysFlag as stored.
	_, fp := newConsumer(t, validConfig(), h)
	flag := consumer.SysFlagCompressed | 4<<8
	res, delay := fp.deliver(t, "ORDER", storedMsg([]byte("opaque"), flag))
	assert.Equal(t, rmq.ConsumeRetryLater, res)
	assert.Equal(t, consumer.DelayLevelDLQ, delay, "dead-lettered at once, never retried")
	assert.False(t, called, "the chain never sees a body it cannot read")

	// Published by the consumer (a batch): the letter keeps the stored body and names the flag.
	p := &fakeProducer{status: primitive.SendOK}
	c, fpb := newBatchConsumer(t, h, withProducer(p))
	m := storedMsg([]byte("opaque"), flag)
	m.WithKeys([]string{"b-2"})
	res, _ = fpb.deliver(t, "ORDER", append(batch("b-1"), m)...)
	assert.Equal(t, rmq.ConsumeSuccess, res)
	require.Len(t, p.sent, 1)
	assert.Equal(t, []byte("opaque"), p.sent[0].Body)
	assert.Equal(t, strconv.Itoa(int(flag)), p.sent[0].GetProperty(consumer.PropBodySysFlag))
	assert.Contains(t, p.sent[0].GetProperty(consumer.PropDeadLetterReason), "unsupported compression (type 4")
	require.NoError(t, c.Shutdown(context.Background()))
}

func TestCompression_ALetterOfADecodedBodyIsPlainAndCarriesNoBodySysFlag(t *testing.T) {
	p := &fakeProducer{status: primitive.SendOK}
	c, fp := newBatchConsumer(t, b3Poison, withProducer(p))
	m := storedMsg(lz4Java(t, plainOrder), consumer.SysFlagCompressed|consumer.SysFlagLZ4)
	m.WithKeys([]string{"b-3"})
	res, _ := fp.deliver(t, "ORDER", append(batch("b-1"), m)...)
	assert.Equal(t, rmq.ConsumeSuccess, res)
	require.Len(t, p.sent, 1)
	assert.Equal(t, plainOrder, p.sent[0].Body, "the handler's dead letter carries the body it saw")
	assert.Empty(t, p.sent[0].GetProperty(consumer.PropBodySysFlag))
	require.NoError(t, c.Shutdown(context.Background()))
}

// BenchmarkDecodeBody measures what every delivery pays before the chain: a plain body (a property
// lookup), a zlib body the client already inflated (a CRC-32 of the body), and an LZ4 / ZSTD decode.
func BenchmarkDecodeBody(b *testing.B) {
	big := bytes.Repeat(plainOrder, 64) // ~5 KB, over the Java client's 4 KB threshold
	inflated := storedMsg(zlibJava(b, big), consumer.SysFlagCompressed|consumer.SysFlagZlib)
	inflated.Body = big
	for name, m := range map[string]*primitive.MessageExt{
		"plain":         storedMsg(big, 0),
		"zlib-inflated": inflated,
		"lz4":           storedMsg(lz4Java(b, big), consumer.SysFlagCompressed|consumer.SysFlagLZ4),
		"zstd":          storedMsg(zstdJava(b, big), consumer.SysFlagCompressed|consumer.SysFlagZSTD),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := consumer.DecodeBody(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
