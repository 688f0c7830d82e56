package rmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

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

// createTopic creates topic on brokerAddr with queues read and write queues and perm 6 (UpdateTopic).
func createTopic(ctx context.Context, brokerAddr, topic string, queues int, c Credentials) error {
	return UpdateTopic(ctx, brokerAddr, TopicConfig{Topic: topic, ReadQueues: queues, WriteQueues: queues, Perm: PermReadWrite}, c)
}

// TopicConfig is what UpdateTopic sets for a topic on one broker.
type TopicConfig struct {
	// Topic is the full topic name as the broker knows it (namespace included).
	Topic string
	// ReadQueues and WriteQueues are the queue counts (≥ 1); pass an existing topic's counts to keep them.
	ReadQueues, WriteQueues int
	// Perm is the permission: 2 write, 4 read, 6 both.
	Perm int
}

// UpdateTopic sends UPDATE_AND_CREATE_TOPIC for t to brokerAddr, signed with c (zero: unsigned), and
// returns the broker's refusal as an *ACLError (no permission) or *BrokerError (any other non-zero code).
// admin.CreateTopic of rocketmq-client-go neither signs this request nor looks at the answer's code, so a
// refused update would only show as a route that never changes.
func UpdateTopic(ctx context.Context, brokerAddr string, t TopicConfig, c Credentials) error {
	ext := map[string]string{
		"topic": t.Topic, "defaultTopic": "TBW102", "readQueueNums": strconv.Itoa(t.ReadQueues),
		"writeQueueNums": strconv.Itoa(t.WriteQueues), "perm": strconv.Itoa(t.Perm),
		"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
	}
	a, err := Call(ctx, brokerAddr, ReqUpdateAndCreateTopic, ext, nil, c)
	if err != nil {
		return fmt.Errorf("broker %w", err)
	}
	switch a.Code {
	case 0:
		return nil
	case CodeNoPermission:
		return &ACLError{AccessKey: c.AccessKey, Broker: brokerAddr, Code: a.Code, Remark: a.Remark}
	default:
		return &BrokerError{Broker: brokerAddr, Request: ReqUpdateAndCreateTopic, Code: a.Code, Remark: a.Remark}
	}
}

// IsACL reports whether err is (or wraps) an *ACLError.
func IsACL(err error) bool {
	var ae *ACLError
	return errors.As(err, &ae)
}

// MarkACL returns err so that errors.Is(err, sentinel) holds when err is (or wraps) an *ACLError, its text
// and chain unchanged; any other err as it is. The public packages mark their refusals with consumer.ErrACL.
func MarkACL(err, sentinel error) error {
	if !IsACL(err) {
		return err
	}
	return aclMarked{err: err, sentinel: sentinel}
}

// aclMarked is an ACL refusal marked with a public sentinel (MarkACL).
type aclMarked struct{ err, sentinel error }

func (e aclMarked) Error() string        { return e.err.Error() }
func (e aclMarked) Unwrap() error        { return e.err }
func (e aclMarked) Is(target error) bool { return target == e.sentinel }
