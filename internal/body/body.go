package body

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/pierrec/lz4/v4"
)

// SysFlag bits of a compressed body (see the package doc).
const (
	// SysFlagCompressed marks a body stored compressed (MessageSysFlag.COMPRESSED_FLAG).
	SysFlagCompressed int32 = 0x1
	// SysFlagCompressionMask selects the codec bits (MessageSysFlag.COMPRESSION_TYPE_COMPARATOR).
	SysFlagCompressionMask int32 = 0x7 << 8
	// SysFlagLZ4 is an LZ4 frame (the Java client's LZ4FrameOutputStream).
	SysFlagLZ4 int32 = 0x1 << 8
	// SysFlagZSTD is a Zstandard frame (the Java client's zstd-jni ZstdOutputStream).
	SysFlagZSTD int32 = 0x2 << 8
	// SysFlagZlib is a zlib stream (RFC 1950, Java's DeflaterOutputStream); 0 means zlib too.
	SysFlagZlib int32 = 0x3 << 8
)

// PropSysFlag is the property a dead letter carries when its body is still compressed: the original
// SysFlag in decimal (see the package doc).
const PropSysFlag = "RMQGUARD_BODY_SYSFLAG"

// MaxDecoded is the largest body Decode decompresses: 64 MiB; a larger one is a corrupt body.
const MaxDecoded = 64 << 20

// ErrUnsupportedCompression means the message's SysFlag names a codec rmqguard cannot read (bits 8–10
// other than 0 zlib, 1 LZ4, 2 ZSTD, 3 zlib).
var ErrUnsupportedCompression = errors.New("unsupported compression")

// ErrCorruptCompressedBody means the body did not decode with the codec its SysFlag names, or decoded
// to more than MaxDecoded.
var ErrCorruptCompressedBody = errors.New("corrupt compressed body")

// CompressionName names the codec of a SysFlag: "zlib", "lz4", "zstd", or "type <n>" for codec bits
// rmqguard does not know; "" when the compressed flag is not set.
func CompressionName(sysFlag int32) string {
	if sysFlag&SysFlagCompressed == 0 {
		return ""
	}
	switch sysFlag & SysFlagCompressionMask {
	case 0, SysFlagZlib:
		return "zlib"
	case SysFlagLZ4:
		return "lz4"
	case SysFlagZSTD:
		return "zstd"
	}
	return "type " + strconv.Itoa(int((sysFlag&SysFlagCompressionMask)>>8))
}

// StoredCompression returns the SysFlag that describes msg's body as it is now when that body is still
// compressed (LZ4 and ZSTD always; zlib when the client did not inflate it, told by BodyCRC), else 0. A
// replayed letter is described by PropSysFlag.
func StoredCompression(msg *primitive.MessageExt) int32 {
	flag := msg.SysFlag
	if flag&SysFlagCompressed != 0 && !storedBody(msg) {
		flag = 0 // the client already decompressed the transport's zlib
	}
	if flag&SysFlagCompressed == 0 {
		p := msg.GetProperty(PropSysFlag)
		if p == "" {
			return 0
		}
		v, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return SysFlagCompressed | SysFlagCompressionMask // unreadable property: an unknown codec
		}
		flag = int32(v)
	}
	if flag&SysFlagCompressed == 0 {
		return 0
	}
	return flag
}

// storedBody reports whether msg's body is still the bytes the broker stored, by BodyCRC.
func storedBody(msg *primitive.MessageExt) bool {
	zlibType := CompressionName(msg.SysFlag) == "zlib"
	if msg.BodyCRC == 0 {
		return !zlibType
	}
	return int32(crc32.ChecksumIEEE(msg.Body)&0x7FFFFFFF) == msg.BodyCRC
}

// Decode returns msg's body decompressed when it is still compressed (StoredCompression), by the codec
// bits: zlib (RFC 1950), LZ4 (frame format), ZSTD (frame format). decoded is false, and body is msg.Body,
// when there was nothing to decode. Errors wrap ErrUnsupportedCompression or ErrCorruptCompressedBody
// with the codec's name. Decode builds a ZSTD decoder for each ZSTD body; a Decoder shares one.
func Decode(msg *primitive.MessageExt) (body []byte, decoded bool, err error) {
	return decode(msg, decodeZSTDOnce)
}

// decode is Decode with the ZSTD decoding given: decodeZSTD turns a whole ZSTD body into the decoded
// bytes.
func decode(msg *primitive.MessageExt, decodeZSTD func([]byte) ([]byte, error)) (body []byte, decoded bool, err error) {
	flag := StoredCompression(msg)
	if flag == 0 {
		return msg.Body, false, nil
	}
	name := CompressionName(flag)
	var r io.Reader
	switch flag & SysFlagCompressionMask {
	case 0, SysFlagZlib:
		zr, zerr := zlib.NewReader(bytes.NewReader(msg.Body))
		if zerr != nil {
			return nil, false, fmt.Errorf("%w (%s, SysFlag %d): %w", ErrCorruptCompressedBody, name, flag, zerr)
		}
		defer zr.Close()
		r = zr
	case SysFlagLZ4:
		r = lz4.NewReader(bytes.NewReader(msg.Body))
	case SysFlagZSTD:
		out, zerr := decodeZSTD(msg.Body)
		if zerr != nil {
			return nil, false, fmt.Errorf("%w (%s, SysFlag %d): %w", ErrCorruptCompressedBody, name, flag, zerr)
		}
		return out, true, nil
	default:
		return nil, false, fmt.Errorf("%w (%s, SysFlag %d): rmqguard reads zlib, lz4 and zstd",
			ErrUnsupportedCompression, name, flag)
	}
	return readDecoded(r, name, flag)
}

// readDecoded reads a decompressing reader to its end, at most MaxDecoded bytes.
func readDecoded(r io.Reader, name string, flag int32) ([]byte, bool, error) {
	out, err := io.ReadAll(io.LimitReader(r, MaxDecoded+1))
	if err != nil {
		return nil, false, fmt.Errorf("%w (%s, SysFlag %d): %w", ErrCorruptCompressedBody, name, flag, err)
	}
	if len(out) > MaxDecoded {
		return nil, false, fmt.Errorf("%w (%s, SysFlag %d): decoded body exceeds %d bytes",
			ErrCorruptCompressedBody, name, flag, MaxDecoded)
	}
	return out, true, nil
}
