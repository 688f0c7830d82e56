// Package topics creates RocketMQ topics up front: a business topic, and a consumer group's retry topic
// (%RETRY%<group>) and dead-letter topic (%DLQ%<group>), which the broker would otherwise create only on
// the group's first retry and first dead letter.
//
// Why up front: the client notices a topic that appears after it started only on its next route refresh
// (every 30 s in rocketmq-client-go), so the first retries of a brand-new group come that much late; and
// brokers before 4.9.2 create a DLQ write-only (perm 2), which nobody can read back. Each master broker holds
// its own queues of a topic, so Ensure works per master: by default on every master the name servers list.
// It is idempotent: it creates the topic on each master that lacks it, makes a write-only DLQ readable, keeps
// the queue counts of every topic that exists, and reports per topic and broker what it found (Created,
// Exists, Updated).
//
// The package is named after what it manages (the client's own package for cluster operations is called
// admin, and covers more). It speaks the remoting protocol of rocketmq-client-go/v2 (4.x and 5.x brokers,
// no gRPC proxy) and signs its requests with ACL credentials when given; the broker's refusals come back as
// errors that match consumer.ErrACL. A consumer ensures its group's topics in Start itself (consumer.Config.SkipTopicEnsure).
//
// # ACL
//
// With ACL the account needs the right to create topics only while they are missing: a later start sends
// only a signed heartbeat and a route query.
package topics
