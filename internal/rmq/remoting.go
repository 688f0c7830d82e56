package rmq

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sort"
	"time"
)

// maxFrame bounds an answer (the cluster table of a cluster is a few kilobytes).
const maxFrame = 16 << 20

// Answer is a remoting response: its code (0 = SUCCESS), remark and body.
type Answer struct {
	Code   int
	Remark string
	Body   []byte
}

// Call sends one remoting request (JSON header, code, ext fields, body) to addr and returns the answer,
// whatever its code. With credentials the request is signed as the client's ACL interceptor signs it:
// HMAC-SHA1 with the secret key over the values of the ext fields (AccessKey included) in key order, then
// the body, base64; the signature goes into the Signature ext field. Frame: int32 total length, int32
// (serialize type << 24 | header length), header, body. Errors: dial, write, read or decode failures.
func Call(ctx context.Context, addr string, code int, ext map[string]string, body []byte, cred Credentials) (Answer, error) {
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return Answer{}, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	deadline, _ := dctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return Answer{}, fmt.Errorf("%s: set deadline: %w", addr, err)
	}
	if err := writeRequest(conn, code, signed(ext, body, cred), body); err != nil {
		return Answer{}, fmt.Errorf("%s: write request %d: %w", addr, code, err)
	}
	a, err := readAnswer(bufio.NewReader(conn))
	if err != nil {
		return Answer{}, fmt.Errorf("%s: answer to request %d: %w", addr, code, err)
	}
	return a, nil
}

// signed returns ext with AccessKey and Signature added when cred is set (a copy; ext is not changed).
func signed(ext map[string]string, body []byte, cred Credentials) map[string]string {
	out := make(map[string]string, len(ext)+2)
	for k, v := range ext {
		out[k] = v
	}
	if cred.AccessKey == "" && cred.SecretKey == "" {
		return out
	}
	out["AccessKey"] = cred.AccessKey
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	mac := hmac.New(sha1.New, []byte(cred.SecretKey))
	for _, k := range keys {
		mac.Write([]byte(out[k]))
	}
	mac.Write(body)
	out["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return out
}

func writeRequest(w io.Writer, code int, ext map[string]string, body []byte) error {
	header, err := json.Marshal(map[string]any{
		"code": code, "language": "GO", "version": 317, "opaque": 1, "flag": 0, "extFields": ext,
	})
	if err != nil {
		return fmt.Errorf("encode header: %w", err)
	}
	frame := make([]byte, 8+len(header)+len(body))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(header)+len(body)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(header))) // serialize type 0 = JSON
	copy(frame[8:], header)
	copy(frame[8+len(header):], body)
	_, err = w.Write(frame)
	return err
}

func readAnswer(r io.Reader) (Answer, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return Answer{}, err
	}
	total := binary.BigEndian.Uint32(lenBuf[:])
	if total < 4 || total > maxFrame {
		return Answer{}, fmt.Errorf("bad frame length %d", total)
	}
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Answer{}, err
	}
	if buf[0] != 0 {
		return Answer{}, fmt.Errorf("unsupported serialize type %d", buf[0])
	}
	headerLen := binary.BigEndian.Uint32(buf[0:4]) & 0xFFFFFF
	if int(headerLen) > len(buf)-4 {
		return Answer{}, fmt.Errorf("bad header length %d", headerLen)
	}
	var h struct {
		Code   int    `json:"code"`
		Remark string `json:"remark"`
	}
	if err := json.Unmarshal(buf[4:4+headerLen], &h); err != nil {
		return Answer{}, fmt.Errorf("decode header: %w", err)
	}
	return Answer{Code: h.Code, Remark: h.Remark, Body: buf[4+headerLen:]}, nil
}
