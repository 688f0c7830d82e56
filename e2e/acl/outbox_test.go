package acl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/dedup"
	"github.com/rmqguard/rmqguard/internal/dedupsql"
	"github.com/rmqguard/rmqguard/internal/outboxsql"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/middleware"
	"github.com/rmqguard/rmqguard/outbox"
)

// The outbox relay in a namespace with the right keys: a message a handler sends through the outbox goes
// to the topic in the namespace (the rows name it without), signed, and a consumer of the namespace
// receives it once with the derived EVENT_ID. // F29
func TestACL_OutboxRelaySendsToTheTopicInItsNamespace(t *testing.T) {
	w := newACLWorld(t)
	db := testenv.MySQL(t)
	prefix := fmt.Sprintf("acl%x_", time.Now().UnixNano()&0xffffff)
	t.Cleanup(func() {
		var names []string
		_ = db.Select(&names, `SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?`, prefix+"%")
		for _, n := range names {
			_, _ = db.Exec("DROP TABLE `" + n + "`")
		}
	})
	err := dedupsql.CheckPrefix(prefix)
	require.NoError(t, err)
	_, err = dedup.Migrate(w.ctx, db.DB, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	_, err = outbox.Migrate(w.ctx, db.DB, prefix)
	require.NoError(t, err)
	store, err := dedup.NewStore(db, dedup.WithTablePrefix(prefix))
	require.NoError(t, err)
	ob, err := outbox.New(store, outbox.Config{NameServers: w.cluster.NameServers, Namespace: w.cluster.Namespace,
		Credentials: w.cluster.Credentials})
	require.NoError(t, err)

	// A handler of another group records the follow-up, as an application's consumer would.
	eventID, err := middleware.EventID(middleware.EventIDConfig{})
	require.NoError(t, err)
	var sent string
	h := testenv.Must(middleware.Chain(dedup.Handle(func(ctx context.Context, _ *sqlx.Tx, d *consumer.Delivery) (consumer.Outcome, error) {
		id, err := ob.Send(ctx, d, outbox.Message{Name: "forward", Topic: w.topic, Body: []byte("follow-up")})
		sent = id
		return consumer.Processed(), err
	}), eventID, testenv.Must(middleware.Dedup(store))))
	in := &primitive.MessageExt{Message: primitive.Message{Topic: "UPSTREAM", Body: []byte("{}")}, MsgId: "m-1"}
	in.WithProperty("EVENT_ID", "upstream-1")
	o, err := h.Handle(w.ctx, testenv.NewDelivery("upstream-group", in))
	require.NoError(t, err)
	require.Equal(t, consumer.KindProcessed, o.Kind)
	require.NotEmpty(t, sent)

	ctx, cancel := context.WithCancel(w.ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- ob.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-relayDone) }()

	got := make(chan seen, 4)
	c := w.newConsumer(t, w.cluster.Credentials, got, func(d *consumer.Delivery) consumer.Outcome {
		assert.Equal(t, sent, d.Msg.GetProperty("EVENT_ID"))
		return consumer.Processed()
	})
	require.NoError(t, c.Start())
	select {
	case s := <-got:
		assert.Equal(t, seen{body: "follow-up", topic: w.topic, group: w.group}, s)
	case <-time.After(60 * time.Second):
		t.Fatalf("the relayed message did not arrive on %s", rmq.InNamespace(w.cluster.Namespace, w.topic))
	}
	var status string
	require.NoError(t, db.Get(&status, "SELECT status FROM "+prefix+outboxsql.Table))
	assert.Equal(t, outboxsql.StatusSent, status)
}
