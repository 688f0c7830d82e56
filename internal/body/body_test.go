package body_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/body"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

var plainOrder = []byte(`{"eventId":"e-1","orderNo":"O-1","note":"zwölf Bücher, 十二本"}`)

// storedMsg is a message on ORDER whose body b the client left as stored, with sysFlag.
func storedMsg(b []byte, sysFlag int32) *primitive.MessageExt {
	return testenv.StoredBody(&primitive.MessageExt{Message: primitive.Message{Topic: "ORDER"}, MsgId: "msg-c-1"}, b, sysFlag)
}

func TestCompression_JavaLZ4AndZSTDBodiesAreDecodedByTheirCodecBits(t *testing.T) {
	for name, tc := range map[string]struct {
		flag int32
		body []byte
	}{
		"lz4":  {body.SysFlagCompressed | body.SysFlagLZ4, testenv.JavaCompressed(t, body.SysFlagLZ4, plainOrder)},
		"zstd": {body.SysFlagCompressed | body.SysFlagZSTD, testenv.JavaCompressed(t, body.SysFlagZSTD, plainOrder)},
	} {
		t.Run(name, func(t *testing.T) {
			got, decoded, err := body.Decode(storedMsg(tc.body, tc.flag))
			require.NoError(t, err)
			assert.True(t, decoded)
			assert.Equal(t, plainOrder, got)
			assert.Equal(t, name, body.CompressionName(tc.flag))
		})
	}
}

func TestCompression_ZlibInflatedByTheClientIsLeftAlone(t *testing.T) {
	for _, flag := range []int32{body.SysFlagCompressed, body.SysFlagCompressed | body.SysFlagZlib} {
		// The client inflated it: the body no longer matches the stored body's CRC.
		m := storedMsg(testenv.JavaCompressed(t, body.SysFlagZlib, plainOrder), flag)
		m.Body = plainOrder
		got, decoded, err := body.Decode(m)
		require.NoError(t, err)
		assert.False(t, decoded, "SysFlag %d", flag)
		assert.Equal(t, plainOrder, got)
		assert.Zero(t, body.StoredCompression(m))
	}
}

func TestCompression_ZlibTheClientCouldNotInflateIsCorrupt(t *testing.T) {
	stored := testenv.JavaCompressed(t, body.SysFlagZlib, plainOrder)
	stored[len(stored)/2] ^= 0xff // the client's inflate failed and passed the stored bytes on
	_, _, err := body.Decode(storedMsg(stored, body.SysFlagCompressed|body.SysFlagZlib))
	require.ErrorIs(t, err, body.ErrCorruptCompressedBody)
	assert.Contains(t, err.Error(), "corrupt compressed body (zlib, SysFlag 769)")
}

func TestCompression_UnknownCodecBitsAreUnsupported(t *testing.T) {
	flag := body.SysFlagCompressed | 5<<8
	_, _, err := body.Decode(storedMsg([]byte("\x01\x02\x03"), flag))
	require.ErrorIs(t, err, body.ErrUnsupportedCompression)
	assert.Contains(t, err.Error(), "unsupported compression (type 5, SysFlag 1281)")
}

func TestCompression_CorruptLZ4AndZSTDFramesAreCorrupt(t *testing.T) {
	lz := testenv.JavaCompressed(t, body.SysFlagLZ4, plainOrder)
	zs := testenv.JavaCompressed(t, body.SysFlagZSTD, plainOrder)
	for name, m := range map[string]*primitive.MessageExt{
		"lz4 truncated":  storedMsg(lz[:len(lz)-6], body.SysFlagCompressed|body.SysFlagLZ4),
		"zstd truncated": storedMsg(zs[:len(zs)-4], body.SysFlagCompressed|body.SysFlagZSTD),
		"lz4 plain text": storedMsg(plainOrder, body.SysFlagCompressed|body.SysFlagLZ4),
	} {
		_, _, err := body.Decode(m)
		require.ErrorIs(t, err, body.ErrCorruptCompressedBody, name)
	}
}

func TestCompression_PlainBodiesAreNotTouched(t *testing.T) {
	m := storedMsg(plainOrder, 0)
	got, decoded, err := body.Decode(m)
	require.NoError(t, err)
	assert.False(t, decoded)
	assert.Equal(t, plainOrder, got)
}

func TestCompression_AReplayedLetterIsDecodedByItsBodySysFlagProperty(t *testing.T) {
	// A letter sent by the Go producer has no codec bits; PropSysFlag carries them.
	m := storedMsg(testenv.JavaCompressed(t, body.SysFlagLZ4, plainOrder), 0)
	m.WithProperty(body.PropSysFlag, strconv.Itoa(int(body.SysFlagCompressed|body.SysFlagLZ4)))
	got, decoded, err := body.Decode(m)
	require.NoError(t, err)
	assert.True(t, decoded)
	assert.Equal(t, plainOrder, got)
}

// BenchmarkDecodeBody measures what every delivery pays before the chain: a plain body (a property
// lookup), a zlib body the client already inflated (a CRC-32 of the body), and an LZ4 / ZSTD decode.
func BenchmarkDecodeBody(b *testing.B) {
	big := bytes.Repeat(plainOrder, 64) // ~5 KB, over the Java client's 4 KB threshold
	inflated := storedMsg(testenv.JavaCompressed(b, body.SysFlagZlib, big), body.SysFlagCompressed|body.SysFlagZlib)
	inflated.Body = big
	for name, m := range map[string]*primitive.MessageExt{
		"plain":         storedMsg(big, 0),
		"zlib-inflated": inflated,
		"lz4":           storedMsg(testenv.JavaCompressed(b, body.SysFlagLZ4, big), body.SysFlagCompressed|body.SysFlagLZ4),
		"zstd":          storedMsg(testenv.JavaCompressed(b, body.SysFlagZSTD, big), body.SysFlagCompressed|body.SysFlagZSTD),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := body.Decode(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A zlib body the client left as the broker stored it (its CRC still matches) is inflated here.
func TestCompression_ZlibStillAsStoredIsInflated(t *testing.T) {
	got, decoded, err := body.Decode(storedMsg(testenv.JavaCompressed(t, body.SysFlagZlib, plainOrder), body.SysFlagCompressed|body.SysFlagZlib))
	require.NoError(t, err)
	assert.True(t, decoded)
	assert.Equal(t, plainOrder, got)
}

// Without a stored CRC (BodyCRC 0), an LZ4 or ZSTD body is taken as stored and decoded, while a zlib one is
// taken as inflated by the client (which inflates zlib itself) and left alone.
func TestCompression_WithoutACRCOnlyZlibIsTakenAsInflated(t *testing.T) {
	lz := storedMsg(testenv.JavaCompressed(t, body.SysFlagLZ4, plainOrder), body.SysFlagCompressed|body.SysFlagLZ4)
	lz.BodyCRC = 0
	got, decoded, err := body.Decode(lz)
	require.NoError(t, err)
	assert.True(t, decoded)
	assert.Equal(t, plainOrder, got)

	zl := storedMsg(plainOrder, body.SysFlagCompressed|body.SysFlagZlib)
	zl.BodyCRC = 0
	got, decoded, err = body.Decode(zl)
	require.NoError(t, err)
	assert.False(t, decoded)
	assert.Equal(t, plainOrder, got)
}

// An LZ4 body that decodes to exactly MaxDecoded bytes is decoded; one byte more is a corrupt body.
func TestCompression_LZ4BodyOfTheLimitDecodesAndOneByteMoreIsCorrupt(t *testing.T) {
	limit := make([]byte, body.MaxDecoded)
	got, decoded, err := body.Decode(storedMsg(testenv.JavaCompressed(t, body.SysFlagLZ4, limit), body.SysFlagCompressed|body.SysFlagLZ4))
	require.NoError(t, err)
	assert.True(t, decoded)
	assert.Len(t, got, body.MaxDecoded)

	over := make([]byte, body.MaxDecoded+1)
	_, _, err = body.Decode(storedMsg(testenv.JavaCompressed(t, body.SysFlagLZ4, over), body.SysFlagCompressed|body.SysFlagLZ4))
	require.ErrorIs(t, err, body.ErrCorruptCompressedBody)
	assert.Contains(t, err.Error(), "decoded body exceeds")
}
