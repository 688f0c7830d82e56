package rmq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Remoting codes of the route query.
const (
	reqGetRouteInfoByTopic = 105 // GET_ROUTEINFO_BY_TOPIC
	codeTopicNotExist      = 17  // TOPIC_NOT_EXIST
)

// Topic permission bits, as the broker stores them in a topic's perm.
const (
	PermWrite = 2
	PermRead  = 4
)

// ErrTopicNotExist is returned (wrapped) by TopicRoute when the name servers know no route for the topic.
var ErrTopicNotExist = errors.New("topic does not exist (no route on the name server)")

// QueueData is one broker's share of a topic, as the name server reports it.
type QueueData struct {
	// BrokerName names the broker (master/slave set) holding the queues.
	BrokerName string
	// BrokerAddr is the master's remoting address ("host:port"), "" when no master is registered.
	BrokerAddr string
	// ReadQueues and WriteQueues are the topic's read and write queue counts on that broker.
	ReadQueues, WriteQueues int
	// Perm is the topic's permission on that broker: PermRead|PermWrite (6), PermWrite alone (2)
	// for a write-only topic, plus 1 when inheritable.
	Perm int
}

// Readable tells whether the perm has the read bit.
func (q QueueData) Readable() bool { return q.Perm&PermRead != 0 }

// Writable tells whether the perm has the write bit.
func (q QueueData) Writable() bool { return q.Perm&PermWrite != 0 }

// TopicRoute asks the name servers (first that answers) for topic's full route: every broker holding it with
// its queue counts and perm, sorted by broker name. Unlike the client's route calls, it also reports
// queues that cannot be read or written.
//
// Errors: invalid arguments; ErrTopicNotExist (wrapped) when the name server has no route; the last
// name server's error when none answered.
func TopicRoute(ctx context.Context, nameServers []string, topic string) ([]QueueData, error) {
	if err := validateNameServers(nameServers); err != nil {
		return nil, fmt.Errorf("route of %q: %w", topic, err)
	}
	var lastErr error
	for _, ns := range nameServers {
		body, err := invokeNameServer(ctx, ns, reqGetRouteInfoByTopic, map[string]string{"topic": topic})
		var ce *codeError
		if errors.As(err, &ce) && ce.Code == codeTopicNotExist {
			return nil, fmt.Errorf("route of %q: %w", topic, ErrTopicNotExist)
		}
		if err != nil {
			lastErr = err
			continue
		}
		qs, err := parseRoute(body)
		if err != nil {
			return nil, fmt.Errorf("route of %q from name server %s: %w", topic, ns, err)
		}
		return qs, nil
	}
	return nil, fmt.Errorf("route of %q: %w", topic, lastErr)
}

// parseRoute decodes a TopicRouteData body.
func parseRoute(body []byte) ([]QueueData, error) {
	var rd struct {
		QueueDatas []struct {
			BrokerName     string `json:"brokerName"`
			ReadQueueNums  int    `json:"readQueueNums"`
			WriteQueueNums int    `json:"writeQueueNums"`
			Perm           int    `json:"perm"`
		} `json:"queueDatas"`
		BrokerDatas []struct {
			BrokerName  string            `json:"brokerName"`
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(QuoteIntKeys(body), &rd); err != nil {
		return nil, fmt.Errorf("decode route: %w", err)
	}
	masters := map[string]string{}
	for _, b := range rd.BrokerDatas {
		masters[b.BrokerName] = b.BrokerAddrs["0"] // broker ID 0 is the master
	}
	out := make([]QueueData, 0, len(rd.QueueDatas))
	for _, q := range rd.QueueDatas {
		out = append(out, QueueData{BrokerName: q.BrokerName, BrokerAddr: masters[q.BrokerName],
			ReadQueues: q.ReadQueueNums, WriteQueues: q.WriteQueueNums, Perm: q.Perm})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BrokerName < out[j].BrokerName })
	return out, nil
}
