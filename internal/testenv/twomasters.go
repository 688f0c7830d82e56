package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// The two-master cluster: a name server and two master brokers of the tests' own
// (deploy/local/broker-instance.sh start, then join), away from the shared pair (9876/10911), the chaos
// stack (19876/20911) and the ACL stack (19886/20921). Each broker also binds its port-2 and port+1.
// It has a name server of its own rather than joining the shared one: every master of a name server gets
// the topics that other tests ensure on "every master" (every consumer's Start), and a dead letter
// published there would vanish with the broker.
const (
	twoMastersNameServerPort = 19896
	twoMastersPortA          = 20951
	twoMastersPortB          = 20961
)

// Master is one master broker: its brokerName and "host:port" remoting address.
type Master struct {
	Name, Addr string
}

// TwoMasters is a name server with two master brokers of one cluster (DefaultCluster), A and B.
type TwoMasters struct {
	// NameServer is the name server's "host:port".
	NameServer string
	// A and B are the masters, named rmqguard-two-a and rmqguard-two-b.
	A, B Master
}

// StartTwoMasters starts the two-master cluster, or reuses it when it runs, waits until the name server
// lists both masters, and removes it (brokers and name server stopped, state deleted) when the test ends.
// When it cannot start, the test is skipped, or failed under RMQGUARD_REQUIRE_SERVICES=1 (Unavailable).
func StartTwoMasters(t testing.TB) TwoMasters {
	t.Helper()
	tm, err := startTwoMasters(t)
	t.Cleanup(func() {
		for _, name := range []string{"twomasters-b", "twomasters-a"} { // the joined broker first, the name server last
			if out, err := brokerInstance("remove", name); err != nil {
				t.Errorf("remove broker instance %s: %v\n%s", name, err, out)
			}
		}
	})
	if err != nil {
		Unavailable(t, "%v", err)
	}
	return tm
}

func startTwoMasters(t testing.TB) (TwoMasters, error) {
	dir := t.TempDir()
	conf := func(name string) (string, error) {
		path := filepath.Join(dir, name+".conf")
		return path, os.WriteFile(path, []byte("brokerName="+name+"\n"), 0o600)
	}
	tm := TwoMasters{A: Master{Name: "rmqguard-two-a"}, B: Master{Name: "rmqguard-two-b"}}
	confA, err := conf(tm.A.Name)
	if err != nil {
		return tm, err
	}
	confB, err := conf(tm.B.Name)
	if err != nil {
		return tm, err
	}
	out, err := brokerInstance("start", "twomasters-a", strconv.Itoa(twoMastersNameServerPort), strconv.Itoa(twoMastersPortA), confA)
	if err != nil {
		return tm, fmt.Errorf("start the first master: %w\n%s", err, out)
	}
	addr := regexp.MustCompile(`namesrv=(\S+) broker=(\S+)`)
	m := addr.FindStringSubmatch(out)
	if m == nil {
		return tm, fmt.Errorf("start the first master: unexpected output %q", out)
	}
	tm.NameServer, tm.A.Addr = m[1], m[2]
	out, err = brokerInstance("join", "twomasters-b", tm.NameServer, strconv.Itoa(twoMastersPortB), confB)
	if err != nil {
		return tm, fmt.Errorf("start the second master: %w\n%s", err, out)
	}
	if m = addr.FindStringSubmatch(out); m == nil {
		return tm, fmt.Errorf("start the second master: unexpected output %q", out)
	}
	tm.B.Addr = m[2]
	return tm, waitListed(tm.NameServer, tm.A, tm.B)
}

// waitListed polls the name server's cluster table until it lists every master (at most 60 s).
func waitListed(nameServer string, masters ...Master) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var last string
	for {
		body, err := rmq.InvokeNameServer(ctx, nameServer, rmq.ReqGetBrokerClusterInfo)
		last = fmt.Sprintf("%s (%v)", body, err)
		listed := err == nil
		for _, m := range masters {
			listed = listed && strings.Contains(string(body), `"`+m.Addr+`"`) && strings.Contains(string(body), `"`+m.Name+`"`)
		}
		if listed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("name server %s does not list masters %v after 60 s: last answer %s", nameServer, masters, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StopMaster stops master m's broker (SIGTERM; its store is kept) and waits until the name server no
// longer lists it. StartMaster starts it again on the same port and store and waits until it is listed.
func (tm TwoMasters) StopMaster(t testing.TB, m Master) {
	t.Helper()
	if out, err := brokerInstance("stop-broker", tm.instance(m)); err != nil {
		t.Fatalf("stop master %s: %v\n%s", m.Name, err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		body, err := rmq.InvokeNameServer(ctx, tm.NameServer, rmq.ReqGetBrokerClusterInfo)
		if err == nil && !strings.Contains(string(body), `"`+m.Addr+`"`) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("name server %s still lists the stopped master %s after 60 s", tm.NameServer, m.Name)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StartMaster: see StopMaster.
func (tm TwoMasters) StartMaster(t testing.TB, m Master) {
	t.Helper()
	if out, err := brokerInstance("start-broker", tm.instance(m)); err != nil {
		t.Fatalf("start master %s: %v\n%s", m.Name, err, out)
	}
	if err := waitListed(tm.NameServer, m); err != nil {
		t.Fatal(err)
	}
}

// instance is the broker-instance.sh name of master m.
func (tm TwoMasters) instance(m Master) string {
	if m == tm.A {
		return "twomasters-a"
	}
	return "twomasters-b"
}
