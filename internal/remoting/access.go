package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Request and response codes (RocketMQ's RequestCode / ResponseCode).
const (
	// ReqUpdateAndCreateTopic is UPDATE_AND_CREATE_TOPIC (17).
	ReqUpdateAndCreateTopic = 17
	// ReqHeartbeat is HEART_BEAT (34).
	ReqHeartbeat = 34
	// ReqGetBrokerClusterInfo is GET_BROKER_CLUSTER_INFO (106).
	ReqGetBrokerClusterInfo = 106
	// CodeNoPermission is NO_PERMISSION (16): how a broker with ACL answers a request whose user it does not
	// know, whose signature does not match, that carries no credentials, or that the account may not make.
	CodeNoPermission = 16
)

// ACLError is a broker's refusal of a request on ACL grounds (response code NO_PERMISSION). Match it with
// errors.As; the consumer and rmqadmin packages name it too (consumer.ACLError, rmqadmin.ACLError).
type ACLError struct {
	// AccessKey is the access key the request was signed with ("" = none given).
	AccessKey string
	// Broker is the broker address ("host:port") that refused.
	Broker string
	// Code is the broker's response code; Remark its explanation (e.g. "check signature failed.").
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

// InvokeNameServer sends one unsigned request without extension fields to a name server and returns the
// body of a SUCCESS (0) answer; another code is an error naming it.
func InvokeNameServer(ctx context.Context, addr string, code int) ([]byte, error) {
	a, err := Call(ctx, addr, code, nil, nil, Credentials{})
	if err != nil {
		return nil, fmt.Errorf("name server %w", err)
	}
	if a.Code != 0 {
		return nil, fmt.Errorf("name server %s: request %d answered code %d: %s", addr, code, a.Code, a.Remark)
	}
	return a.Body, nil
}

// CheckAccess sends one signed heartbeat (registering no producer or consumer) to the broker brokerAddr
// ("host:port") and returns nil when the broker accepts cred (both empty: no credentials), an *ACLError
// when it refuses them, or the transport error. rocketmq-client-go only logs a refused heartbeat or pull,
// so a consumer with a wrong secret would otherwise just receive nothing.
func CheckAccess(ctx context.Context, brokerAddr string, cred Credentials) error {
	body, err := json.Marshal(map[string]any{
		"clientID":        "rmqguard-acl-check-" + strconv.Itoa(os.Getpid()),
		"producerDataSet": []any{}, "consumerDataSet": []any{},
	})
	if err != nil {
		return fmt.Errorf("check access on broker %s: encode heartbeat: %w", brokerAddr, err)
	}
	a, err := Call(ctx, brokerAddr, ReqHeartbeat, nil, body, cred)
	if err != nil {
		return fmt.Errorf("check access on broker %w", err)
	}
	switch a.Code {
	case 0:
		return nil
	case CodeNoPermission:
		return fmt.Errorf("check access: %w", &ACLError{AccessKey: cred.AccessKey, Broker: brokerAddr, Code: a.Code, Remark: a.Remark})
	default:
		return fmt.Errorf("check access on broker %s: heartbeat answered code %d: %s", brokerAddr, a.Code, a.Remark)
	}
}

// masterAddr matches a master (brokerId 0) entry of a brokerAddrs map in the name server's cluster table,
// which is fastjson output with unquoted integer keys ({0:"127.0.0.1:10911"}) that encoding/json rejects.
var masterAddr = regexp.MustCompile(`[{,]0:"([^"]+)"`)

// MasterBrokers returns the master broker addresses that the first answering name server lists. Errors:
// no name server answered (the last error), or the answer lists no master.
func MasterBrokers(ctx context.Context, nameServers []string) ([]string, error) {
	lastErr := errors.New("no name server address given")
	for _, ns := range nameServers {
		if strings.TrimSpace(ns) == "" {
			continue
		}
		body, err := InvokeNameServer(ctx, ns, ReqGetBrokerClusterInfo)
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
func CheckClusterAccess(ctx context.Context, nameServers []string, cred Credentials) error {
	addrs, err := MasterBrokers(ctx, nameServers)
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
