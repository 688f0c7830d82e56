package rmq

import (
	"context"
	"errors"
	"testing"
)

// The name server's route body is fastjson with unquoted integer keys in brokerAddrs; TopicRoute reads the
// perm and queue counts of every broker (also write-only ones, which the client's route calls leave out).
func TestTopicRoute_ParsesPermAndQueueCounts(t *testing.T) {
	body := `{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-b","cluster":"c"},` +
		`{"brokerAddrs":{1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"c"}],"filterServerTable":{},` +
		`"queueDatas":[{"brokerName":"broker-b","perm":2,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":1},` +
		`{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":8}]}`
	ns := fakeNameServer(t, 0, body)
	got, err := TopicRoute(context.Background(), []string{ns}, "%DLQ%g")
	if err != nil {
		t.Fatal(err)
	}
	want := []QueueData{
		{BrokerName: "broker-a", BrokerAddr: "", ReadQueues: 4, WriteQueues: 8, Perm: 6}, // no master registered
		{BrokerName: "broker-b", BrokerAddr: "127.0.0.1:10911", ReadQueues: 1, WriteQueues: 1, Perm: 2},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("route = %+v, want %+v", got, want)
	}
	if !got[0].Readable() || got[1].Readable() || !got[1].Writable() {
		t.Fatalf("perm bits wrong: %+v", got)
	}
}

func TestTopicRoute_TopicNotExist(t *testing.T) {
	ns := fakeNameServer(t, codeTopicNotExist, "")
	_, err := TopicRoute(context.Background(), []string{ns}, "%DLQ%none")
	if !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("err = %v, want ErrTopicNotExist", err)
	}
	other := fakeNameServer(t, 1, "")
	if _, err := TopicRoute(context.Background(), []string{other}, "%DLQ%x"); err == nil || errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("a system error must not read as a missing topic: %v", err)
	}
}
