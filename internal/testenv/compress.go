package testenv

import (
	"bytes"
	"compress/zlib"
	"hash/crc32"
	"io"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/body"
)

// JavaCompressed compresses b as the Java 5.x client's codec of sysFlag's codec bits frames it: an LZ4
// frame (lz4-java LZ4FrameOutputStream: independent 4 MB blocks, no content checksum), a Zstandard frame
// (zstd-jni ZstdOutputStream: one streamed frame, no checksum), else a zlib stream at level 5
// (java.util.zip.DeflaterOutputStream, RFC 1950).
func JavaCompressed(t testing.TB, sysFlag int32, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var magic []byte
	switch sysFlag & body.SysFlagCompressionMask {
	case body.SysFlagLZ4:
		lw := lz4.NewWriter(&buf)
		require.NoError(t, lw.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(false)))
		w, magic = lw, []byte{0x04, 0x22, 0x4d, 0x18}
	case body.SysFlagZSTD:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1))
		require.NoError(t, err)
		w, magic = zw, []byte{0x28, 0xb5, 0x2f, 0xfd}
	default:
		zw, err := zlib.NewWriterLevel(&buf, 5)
		require.NoError(t, err)
		w = zw
	}
	_, err := w.Write(b)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.True(t, bytes.HasPrefix(buf.Bytes(), magic), "frame magic %x", magic)
	return buf.Bytes()
}

// StoredBody gives m the body b as the Go client hands it over when it did not inflate it: the stored
// bytes, the broker's 31-bit CRC of them, and sysFlag. It returns m.
func StoredBody(m *primitive.MessageExt, b []byte, sysFlag int32) *primitive.MessageExt {
	m.Body, m.SysFlag = b, sysFlag
	m.BodyCRC = int32(crc32.ChecksumIEEE(b) & 0x7FFFFFFF)
	return m
}
