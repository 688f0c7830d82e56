package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rmqguard/rmqguard/consumer"
)

// The ACL test broker: instance name and ports (deploy/local/broker-instance.sh), away from the shared pair
// (9876/10911) and the chaos stack (19876/20911). The broker also binds ACLBrokerPort-2 and ACLBrokerPort+1.
const (
	ACLBrokerInstance = "acl"
	ACLNameServerPort = 19886
	ACLBrokerPort     = 20921
)

// The super user's keys written in deploy/local/rocketmq/broker-acl.conf.
const (
	ACLAccessKey = "rmqguard-acl"
	ACLSecretKey = "rmqguard-acl-secret"
)

// ACLStack is a name server and a broker with ACL 2.0 on (deploy/local/rocketmq/broker-acl.conf).
type ACLStack struct {
	// NameServer and Broker are "host:port" addresses.
	NameServer, Broker string
	// Credentials are the super user's keys (ACLAccessKey, ACLSecretKey).
	Credentials consumer.Credentials
}

// StartACLBroker starts the ACL name server and broker, or reuses them when they run (a start takes
// 5–20 s; a reuse milliseconds), and returns their addresses. Stop them with RemoveACLBroker (a TestMain
// does it once the package's tests ran). Errors: the script's, with its output (e.g. no Maven to fetch the jars).
func StartACLBroker() (ACLStack, error) {
	conf := filepath.Join(repoRoot(), "deploy", "local", "rocketmq", "broker-acl.conf")
	out, err := brokerInstance("start", ACLBrokerInstance, strconv.Itoa(ACLNameServerPort), strconv.Itoa(ACLBrokerPort), conf)
	if err != nil {
		return ACLStack{}, fmt.Errorf("start the ACL broker: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`namesrv=(\S+) broker=(\S+)`).FindStringSubmatch(out)
	if m == nil {
		return ACLStack{}, fmt.Errorf("start the ACL broker: unexpected output %q", out)
	}
	return ACLStack{NameServer: m[1], Broker: m[2], Credentials: consumer.Credentials{AccessKey: ACLAccessKey, SecretKey: ACLSecretKey}}, nil
}

// RemoveACLBroker stops the ACL name server and broker and deletes their state (users included).
func RemoveACLBroker() error {
	if out, err := brokerInstance("remove", ACLBrokerInstance); err != nil {
		return fmt.Errorf("remove the ACL broker: %w\n%s", err, out)
	}
	return nil
}

// ACLBroker returns the running ACL stack, starting it if needed; when it cannot start, the test is
// skipped, or failed under RMQGUARD_REQUIRE_SERVICES=1 (Unavailable).
func ACLBroker(t testing.TB) ACLStack {
	t.Helper()
	s, err := StartACLBroker()
	if err != nil {
		Unavailable(t, "%v", err)
	}
	return s
}

func brokerInstance(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script := filepath.Join(repoRoot(), "deploy", "local", "broker-instance.sh")
	out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
	return string(out), err
}

// repoRoot is the module's root directory (this file is internal/testenv/aclbroker.go).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
