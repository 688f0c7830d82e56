package rmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

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
	body, err := invokeNameServer(ctx, nameServer, ReqGetBrokerClusterInfo, nil)
	if err != nil {
		return false, err
	}
	// The body is fastjson output whose maps may have unquoted integer keys ({0:"127.0.0.1:10911"}), which
	// encoding/json rejects; the quoted address is unambiguous enough for a presence check.
	return strings.Contains(string(body), `"`+brokerAddr+`"`), nil
}

// invokeNameServer sends one unsigned remoting request with the extension fields ext (nil: none) to a name
// server (Call) and returns the body of a SUCCESS (0) answer; any other answer code is a
// *codeError.
func invokeNameServer(ctx context.Context, addr string, code int, ext map[string]string) ([]byte, error) {
	a, err := Call(ctx, addr, code, ext, nil, Credentials{})
	if err != nil {
		return nil, fmt.Errorf("name server %w", err)
	}
	if a.Code != 0 {
		return nil, fmt.Errorf("name server %s: request %d: %w", addr, code, &codeError{Code: a.Code, Remark: a.Remark})
	}
	return a.Body, nil
}

// codeError is a remoting answer code other than SUCCESS, with the server's remark.
type codeError struct {
	Code   int
	Remark string
}

func (e *codeError) Error() string { return fmt.Sprintf("answered code %d: %s", e.Code, e.Remark) }
