// Package dlq routes messages to a consumer group's dead-letter queue, %DLQ%<group>, with the reason
// attached, and reads the DLQ back.
//
// # Namespaces
//
// On a cluster with ACL or a namespace, build a producer from a Cluster, which gives it the name servers,
// the credentials and the group in the namespace, and no client namespace option (the client would prefix
// the already complete "%DLQ%<ns>%<group>" once more):
//
//	p, err := rocketmq.NewProducer(append(cluster.ProducerOptions(group+"-dlq"),
//		producer.WithInstanceName("…unique…"))...)
//
// The consumer sets Delivery.Namespace from Config.Namespace. StartPublisher builds its producer this way;
// given to consumer.WithDeadLetterSink, the Publisher is closed by the consumer's Shutdown (the consumer
// closes a sink that implements io.Closer).
//
// # Scans
//
// A scan is bounded: each readable queue is read from its min offset (older letters have expired) up to the
// max offset captured when the scan starts, so letters arriving meanwhile are not chased. Since/Until also
// narrow the offsets through the broker's search by store time (widened by ClockSkew either side); letters
// are then matched on FailedAt exactly. Reading an empty queue costs one short request, never a long-poll.
// ctx is checked between pulls; one pull cannot be interrupted (the client bounds it by 30 s). A scan's
// trouble short of failing — a queue or broker not readable, a pull error, ctx ending, the limit hit —
// returns what was read. FixPerm re-creates a write-only topic with the admin UPDATE_AND_CREATE_TOPIC request
// on the broker's master, which updates an existing topic.
//
// # The DLQ census
//
// A Monitor's census that fails or reads the DLQ only in part removes the series until one succeeds again (a
// partial count would read as letters replayed, then as new letters). So does a census that misses a broker
// where the Monitor last counted waiting letters and that is no longer listed as a master: a master that is
// down is forgotten by the name server, and the scan of the others looks complete. Such a broker is
// forgotten after an hour (the alert's window; removed for good, say): the count without it is exported from
// then on.
//
// # Replay
//
// A replay goes to the group's retry topic, so that only that group receives it (the broker delivers a
// group's retry topic to that group alone); the client and consumer.NewDelivery restore RETRY_TOPIC as the
// visible topic. The names are already the broker's, so the producer must have no namespace option. The
// broker stores it with ReconsumeTimes 0, so the group's full retry budget applies again. A group that does
// not subscribe the topic cannot hand the message to a handler (the client retries it until it is
// dead-lettered again).
package dlq
