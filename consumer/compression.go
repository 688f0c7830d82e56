package consumer

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

// SysFlag bits that describe a compressed body, as the Java client (4.x and 5.x) and the broker write
// them: the compressed flag, and in bits 8–10 the codec. The Java 5.x producer sets the codec of its
// compressType (default zlib); 4.x producers and the Go producer set none (0), which means zlib.
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

// PropBodySysFlag is the property a dead letter published by rmqguard carries when its body is still
// compressed (a codec rmqguard cannot read, or a body that failed to decode): the original SysFlag in
// decimal. The Go producer cannot set a message's SysFlag, so the flag travels as a property; consumers
// built with New honour it on a message whose own SysFlag says nothing (a replayed letter), and
// operators read the codec from it.
const PropBodySysFlag = "RMQGUARD_BODY_SYSFLAG"

// MaxDecodedBody is the largest body rmqguard decompresses: 64 MiB. A larger one is a corrupt body
// (the broker's own limit for a stored message is 4 MiB by default). It bounds only the bodies rmqguard
// decodes itself (LZ4, ZSTD, and zlib the client left as stored): a zlib body the client inflates (the
// usual case) is inflated by rocketmq-client-go before rmqguard sees it, without any limit, so a stored
// body of 4 MiB can become gigabytes in the consumer's memory, and reaches the handler at whatever size.
const MaxDecodedBody = 64 << 20

// ErrUnsupportedCompression means the message's SysFlag names a codec rmqguard cannot read (bits 8–10
// other than 0 zlib, 1 LZ4, 2 ZSTD, 3 zlib). Such a message is dead-lettered at once.
var ErrUnsupportedCompression = errors.New("unsupported compression")

// ErrCorruptCompressedBody means the body did not decode with the codec its SysFlag names, or decoded
// to more than MaxDecodedBody. Such a message is dead-lettered at once.
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
// replayed letter is described by PropBodySysFlag.
func StoredCompression(msg *primitive.MessageExt) int32 {
	flag := msg.SysFlag
	if flag&SysFlagCompressed != 0 && !storedBody(msg) {
		flag = 0 // the client already decompressed the transport's zlib
	}
	if flag&SysFlagCompressed == 0 {
		p := msg.GetProperty(PropBodySysFlag)
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

// DecodeBody returns msg's body decompressed when it is still compressed (StoredCompression), by the
// codec bits: zlib (RFC 1950), LZ4 (frame format), ZSTD (frame format, at most MaxDecodedBody bytes and a
// declared window of at most 128 MiB). decoded is false, and body is msg.Body, when there was nothing to
// decode. Errors wrap ErrUnsupportedCompression or ErrCorruptCompressedBody with the codec's name.
// DecodeBody builds a ZSTD decoder for each ZSTD body; a Consumer holds one for all its deliveries.
func DecodeBody(msg *primitive.MessageExt) (body []byte, decoded bool, err error) {
	return decodeBody(msg, decodeZSTDOnce)
}

// decodeBody is DecodeBody with the ZSTD decoding given: decodeZSTD turns a whole ZSTD body into the
// decoded bytes.
func decodeBody(msg *primitive.MessageExt, decodeZSTD func([]byte) ([]byte, error)) (body []byte, decoded bool, err error) {
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

// readDecoded reads a decompressing reader to its end, at most MaxDecodedBody bytes.
func readDecoded(r io.Reader, name string, flag int32) ([]byte, bool, error) {
	out, err := io.ReadAll(io.LimitReader(r, MaxDecodedBody+1))
	if err != nil {
		return nil, false, fmt.Errorf("%w (%s, SysFlag %d): %w", ErrCorruptCompressedBody, name, flag, err)
	}
	if len(out) > MaxDecodedBody {
		return nil, false, fmt.Errorf("%w (%s, SysFlag %d): decoded body exceeds %d bytes",
			ErrCorruptCompressedBody, name, flag, MaxDecodedBody)
	}
	return out, true, nil
}
