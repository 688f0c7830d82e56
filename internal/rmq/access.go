package rmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
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
// errors.As; the public packages mark it for their users with consumer.ErrACL (MarkACL).
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
	return invokeNameServer(ctx, addr, code, nil)
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

// unquotedKey matches the integer map keys of the name server's fastjson output ({0:"127.0.0.1:10911"}),
// which encoding/json rejects.
var unquotedKey = regexp.MustCompile(`([{,])(-?\d+):`)

// QuoteIntKeys quotes the integer map keys of a fastjson body ({0:"a"} → {"0":"a"}) so that encoding/json
// reads it.
func QuoteIntKeys(body []byte) []byte { return unquotedKey.ReplaceAll(body, []byte(`$1"$2":`)) }

// Master is a master broker (brokerId 0) as a name server's cluster table lists it.
type Master struct {
	// Name is the broker name (brokerName: the master/slave set), Addr the master's "host:port" remoting address.
	Name, Addr string
}

// Masters returns every master broker that the first answering name server lists (all its clusters),
// sorted by broker name. Errors: no name server answered (the last error); an answer that cannot be
// decoded, or that lists no master.
// Errors also: an empty name server list or a blank entry. Errors read "master brokers: ...".
func Masters(ctx context.Context, nameServers []string) ([]Master, error) {
	if err := validateNameServers(nameServers); err != nil {
		return nil, fmt.Errorf("master brokers: %w", err)
	}
	masters, err := listMasters(ctx, nameServers)
	if err != nil {
		return nil, fmt.Errorf("master brokers: %w", err)
	}
	return masters, nil
}

// listMasters is Masters without the check of nameServers and the "master brokers" context.
func listMasters(ctx context.Context, nameServers []string) ([]Master, error) {
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
		var ci struct {
			BrokerAddrTable map[string]struct {
				BrokerAddrs map[string]string `json:"brokerAddrs"`
			} `json:"brokerAddrTable"`
		}
		if err := json.Unmarshal(QuoteIntKeys(body), &ci); err != nil {
			return nil, fmt.Errorf("name server %s: decode cluster table: %w", ns, err)
		}
		var out []Master
		for name, b := range ci.BrokerAddrTable {
			if addr := b.BrokerAddrs["0"]; addr != "" {
				out = append(out, Master{Name: name, Addr: addr})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("name server %s lists no master broker", ns)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	}
	return nil, lastErr
}

// MasterBrokers returns the addresses of Masters.
func MasterBrokers(ctx context.Context, nameServers []string) ([]string, error) {
	masters, err := listMasters(ctx, nameServers)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, 0, len(masters))
	for _, m := range masters {
		addrs = append(addrs, m.Addr)
	}
	return addrs, nil
}

// CheckClusterAccess runs CheckAccess on every master broker the name servers list. Errors: the name
// server query's, or the first broker's refusal (*ACLError) or transport error.
func CheckClusterAccess(ctx context.Context, nameServers []string, cred Credentials) error {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("check access: %w", err)
	}
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
