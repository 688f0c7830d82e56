package rmqadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"github.com/rmqguard/rmqguard/consumer"
)

// Remoting request and response codes used here (RocketMQ's RequestCode / ResponseCode).
const (
	reqUpdateAndCreateTopic = 17
	reqHeartbeat            = 34
	// codeNoPermission (NO_PERMISSION) is how a broker with ACL answers a request whose signature or
	// access key it does not accept, or which the account may not make.
	codeNoPermission = 16
)

// ACLError is a broker's refusal of a request on ACL grounds (response code NO_PERMISSION): the access
// key is unknown, the secret key does not match (signature mismatch), no credentials were given, or the
// account lacks the permission. Match it with errors.As.
type ACLError struct {
	// AccessKey is the access key the request was signed with ("" = none given).
	AccessKey string
	// Broker is the broker address ("host:port") that refused.
	Broker string
	// Code is the broker's response code; Remark its explanation.
	Code   int
	Remark string
}

// Error renders "ACL: access denied / signature mismatch for access key <key> on broker <addr> (code N: remark)".
func (e *ACLError) Error() string {
	key := e.AccessKey
	if key == "" {
		key = "(none: credentials required)"
	}
	return fmt.Sprintf("ACL: access denied / signature mismatch for access key %s on broker %s (code %d: %s)",
		key, e.Broker, e.Code, e.Remark)
}

// BrokerError is a broker's answer other than SUCCESS that is not an ACL refusal.
type BrokerError struct {
	// Broker is the broker address; Request the remoting request code; Code and Remark the answer.
	Broker  string
	Request int
	Code    int
	Remark  string
}

// Error renders "broker <addr>: request <n> answered code <c>: <remark>".
func (e *BrokerError) Error() string {
	return fmt.Sprintf("broker %s: request %d answered code %d: %s", e.Broker, e.Request, e.Code, e.Remark)
}

// answerError returns nil for SUCCESS, an *ACLError for NO_PERMISSION, else a *BrokerError.
func answerError(broker string, request int, a answer, cred consumer.Credentials) error {
	switch a.Code {
	case 0:
		return nil
	case codeNoPermission:
		return &ACLError{AccessKey: cred.AccessKey, Broker: broker, Code: a.Code, Remark: a.Remark}
	default:
		return &BrokerError{Broker: broker, Request: request, Code: a.Code, Remark: a.Remark}
	}
}

// CheckAccess sends one signed heartbeat (registering no producer or consumer) to the broker brokerAddr
// ("host:port") and returns nil when the broker accepts cred (the zero value: no credentials), an *ACLError
// when it refuses them, or the transport error. rocketmq-client-go only logs a refused heartbeat or pull,
// so a consumer with a wrong secret would otherwise just receive nothing.
func CheckAccess(ctx context.Context, brokerAddr string, cred consumer.Credentials) error {
	body, err := json.Marshal(map[string]any{
		"clientID":        "rmqguard-acl-check-" + strconv.Itoa(os.Getpid()),
		"producerDataSet": []any{}, "consumerDataSet": []any{},
	})
	if err != nil {
		return fmt.Errorf("check access on broker %s: encode heartbeat: %w", brokerAddr, err)
	}
	a, err := call(ctx, brokerAddr, reqHeartbeat, nil, body, cred)
	if err != nil {
		return fmt.Errorf("check access on broker %w", err)
	}
	if err := answerError(brokerAddr, reqHeartbeat, a, cred); err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	return nil
}

// createTopic sends UPDATE_AND_CREATE_TOPIC to brokerAddr, signed with cred, and returns the broker's
// refusal as an *ACLError or *BrokerError. (admin.CreateTopic of rocketmq-client-go neither signs this
// request nor looks at the answer's code, so with ACL on it fails silently.)
func createTopic(ctx context.Context, brokerAddr, topic string, queues int, cred consumer.Credentials) error {
	ext := map[string]string{
		"topic": topic, "defaultTopic": "TBW102", "readQueueNums": strconv.Itoa(queues),
		"writeQueueNums": strconv.Itoa(queues), "perm": strconv.Itoa(PermReadWrite),
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}
	a, err := call(ctx, brokerAddr, reqUpdateAndCreateTopic, ext, nil, cred)
	if err != nil {
		return fmt.Errorf("broker %w", err)
	}
	return answerError(brokerAddr, reqUpdateAndCreateTopic, a, cred)
}

// IsACL reports whether err is (or wraps) an *ACLError.
func IsACL(err error) bool {
	var ae *ACLError
	return errors.As(err, &ae)
}

// masterAddr matches a master (brokerId 0) entry of a brokerAddrs map in the name server's cluster table,
// which is fastjson output with unquoted integer keys ({0:"127.0.0.1:10911"}) that encoding/json rejects.
var masterAddr = regexp.MustCompile(`[{,]0:"([^"]+)"`)

// masterBrokers returns the master broker addresses the first answering name server lists.
func masterBrokers(ctx context.Context, nameServers []string) ([]string, error) {
	var lastErr error
	for _, ns := range nameServers {
		body, err := invokeNameServer(ctx, ns, reqGetBrokerClusterInfo)
		if err != nil {
			lastErr = err
			continue
		}
		var addrs []string
		for _, m := range masterAddr.FindAllSubmatch(body, -1) {
			addrs = append(addrs, string(m[1]))
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("name server %s lists no master broker", ns)
		}
		return addrs, nil
	}
	return nil, lastErr
}

// CheckClusterAccess runs CheckAccess on every master broker the name servers list. Errors: the name
// server query's, or the first broker's refusal (*ACLError) or transport error.
func CheckClusterAccess(ctx context.Context, nameServers []string, cred consumer.Credentials) error {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	addrs, err := masterBrokers(ctx, nameServers)
	if err != nil {
		return fmt.Errorf("check access: %w", err)
	}
	for _, a := range addrs {
		if err := CheckAccess(ctx, a, cred); err != nil {
			return err
		}
	}
	return nil
}
