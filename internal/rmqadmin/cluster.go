package rmqadmin

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// reqGetBrokerClusterInfo is the remoting request code GET_BROKER_CLUSTER_INFO (106). rocketmq-client-go's
// admin API does not expose it, so brokerRegistered speaks the (small) remoting framing itself.
const reqGetBrokerClusterInfo = 106

// maxFrame bounds a name server answer (the cluster table of a local cluster is a few hundred bytes).
const maxFrame = 16 << 20

// WaitBrokerRegistered blocks until at least one of nameServers lists the broker brokerAddr ("host:port", as
// the broker registers it, i.e. brokerIP1:listenPort) in its cluster table, polling every RoutePollInterval.
//
// It returns nil once the broker is listed, or an error wrapping ctx.Err() (with the last error seen) when
// ctx ends first. Use it after starting a broker and before asking the name server for its topics: until the
// broker has registered, the name server answers TOPIC_NOT_EXIST for topics the broker does have.
func WaitBrokerRegistered(ctx context.Context, nameServers []string, brokerAddr string) error {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("wait for broker %s: %w", brokerAddr, err)
	}
	if strings.TrimSpace(brokerAddr) == "" {
		return errors.New("wait for broker: empty broker address")
	}
	ticker := time.NewTicker(RoutePollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		for _, ns := range nameServers {
			ok, err := brokerRegistered(ctx, ns, brokerAddr)
			if err != nil {
				if !ctxExpired(ctx) || lastErr == nil { // keep the informative error, not the deadline's
					lastErr = err
				}
				continue
			}
			if ok {
				return nil
			}
			lastErr = fmt.Errorf("name server %s does not list broker %s yet", ns, brokerAddr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for broker %s to register with name server %v: %w (last: %v)",
				brokerAddr, nameServers, ctx.Err(), lastErr)
		case <-ticker.C:
		}
	}
}

// ctxExpired reports whether ctx is done or its deadline has passed (a dial bounded by the same deadline can
// fail a moment before ctx.Err() turns non-nil).
func ctxExpired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// brokerRegistered asks one name server for its cluster table and reports whether brokerAddr is in it.
func brokerRegistered(ctx context.Context, nameServer, brokerAddr string) (bool, error) {
	body, err := invokeNameServer(ctx, nameServer, reqGetBrokerClusterInfo, nil)
	if err != nil {
		return false, err
	}
	// The body is fastjson output whose maps may have unquoted integer keys ({0:"127.0.0.1:10911"}), which
	// encoding/json rejects; the quoted address is unambiguous enough for a presence check.
	return strings.Contains(string(body), `"`+brokerAddr+`"`), nil
}

// invokeNameServer sends one remoting request with the extension fields ext (nil: none) and returns the body
// of a SUCCESS (0) answer; any other answer code is a *codeError. Frame: int32 total length, int32
// (serialize type << 24 | header length), JSON header, body.
func invokeNameServer(ctx context.Context, addr string, code int, ext map[string]string) ([]byte, error) {
	if ext == nil {
		ext = map[string]string{}
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial name server %s: %w", addr, err)
	}
	defer conn.Close()
	deadline, _ := dctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("name server %s: set deadline: %w", addr, err)
	}

	header, err := json.Marshal(map[string]any{
		"code": code, "language": "GO", "version": 317, "opaque": 1, "flag": 0, "extFields": ext,
	})
	if err != nil {
		return nil, fmt.Errorf("encode request header: %w", err)
	}
	frame := make([]byte, 8+len(header))
	binary.BigEndian.PutUint32(frame[0:4], uint32(4+len(header)))
	binary.BigEndian.PutUint32(frame[4:8], uint32(len(header))) // serialize type 0 = JSON
	copy(frame[8:], header)
	if _, err := conn.Write(frame); err != nil {
		return nil, fmt.Errorf("name server %s: write request %d: %w", addr, code, err)
	}

	r := bufio.NewReader(conn)
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("name server %s: read answer to request %d: %w", addr, code, err)
	}
	total := binary.BigEndian.Uint32(lenBuf[:])
	if total < 4 || total > maxFrame {
		return nil, fmt.Errorf("name server %s: bad frame length %d", addr, total)
	}
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("name server %s: read answer to request %d: %w", addr, code, err)
	}
	headerLen := binary.BigEndian.Uint32(buf[0:4]) & 0xFFFFFF
	if buf[0] != 0 {
		return nil, fmt.Errorf("name server %s: unsupported serialize type %d", addr, buf[0])
	}
	if int(headerLen) > len(buf)-4 {
		return nil, fmt.Errorf("name server %s: bad header length %d", addr, headerLen)
	}
	var h struct {
		Code   int    `json:"code"`
		Remark string `json:"remark"`
	}
	if err := json.Unmarshal(buf[4:4+headerLen], &h); err != nil {
		return nil, fmt.Errorf("name server %s: decode answer header: %w", addr, err)
	}
	if h.Code != 0 {
		return nil, fmt.Errorf("name server %s: request %d: %w", addr, code, &codeError{Code: h.Code, Remark: h.Remark})
	}
	return buf[4+headerLen:], nil
}

// codeError is a remoting answer code other than SUCCESS, with the server's remark.
type codeError struct {
	Code   int
	Remark string
}

func (e *codeError) Error() string { return fmt.Sprintf("answered code %d: %s", e.Code, e.Remark) }
