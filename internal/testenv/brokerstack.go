package testenv

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// BrokerStack is a name server and one broker of a test's own (deploy/local/broker-instance.sh), which
// the test may stop and start: never the shared pair (9876/10911). The broker also binds its port-2 and
// port+1.
type BrokerStack struct {
	// NameServer and Broker are "host:port" addresses.
	NameServer, Broker string
	instance           string
}

// StartBrokerStack starts instance name's name server on nsPort and broker on brokerPort (or reuses
// them), waits until the name server lists the broker, and removes both (state deleted) when the test
// ends. When it cannot start, the test is skipped, or failed under RMQGUARD_REQUIRE_SERVICES=1.
func StartBrokerStack(t testing.TB, name string, nsPort, brokerPort int) BrokerStack {
	t.Helper()
	t.Cleanup(func() {
		if out, err := brokerInstance("remove", name); err != nil {
			t.Errorf("remove broker instance %s: %v\n%s", name, err, out)
		}
	})
	out, err := brokerInstance("start", name, strconv.Itoa(nsPort), strconv.Itoa(brokerPort))
	if err != nil {
		Unavailable(t, "start broker instance %s: %v\n%s", name, err, out)
	}
	m := regexp.MustCompile(`namesrv=(\S+) broker=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		Unavailable(t, "start broker instance %s: unexpected output %q", name, out)
	}
	s := BrokerStack{NameServer: m[1], Broker: m[2], instance: name}
	if err := s.waitListed(true); err != nil {
		Unavailable(t, "%v", err)
	}
	return s
}

// StopBroker stops the broker (SIGTERM; its store is kept) and waits until the name server no longer
// lists it. StartBroker starts it again on the same port and store and waits until it is listed.
func (s BrokerStack) StopBroker(t testing.TB) {
	t.Helper()
	if out, err := brokerInstance("stop-broker", s.instance); err != nil {
		t.Fatalf("stop broker %s: %v\n%s", s.instance, err, out)
	}
	if err := s.waitListed(false); err != nil {
		t.Fatal(err)
	}
}

// StartBroker: see StopBroker.
func (s BrokerStack) StartBroker(t testing.TB) {
	t.Helper()
	if out, err := brokerInstance("start-broker", s.instance); err != nil {
		t.Fatalf("start broker %s: %v\n%s", s.instance, err, out)
	}
	if err := s.waitListed(true); err != nil {
		t.Fatal(err)
	}
}

// waitListed polls the name server's cluster table until it lists the broker (listed) or no longer
// does (at most 60 s).
func (s BrokerStack) waitListed(listed bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		body, err := rmq.InvokeNameServer(ctx, s.NameServer, rmq.ReqGetBrokerClusterInfo)
		if err == nil && strings.Contains(string(body), `"`+s.Broker+`"`) == listed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("name server %s: broker %s listed is not %v after 60 s (last error %v)", s.NameServer, s.Broker, listed, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
