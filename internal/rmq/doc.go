// Package rmq is rmqguard's low RocketMQ plumbing; it imports no other package of this module.
//
//   - Names: namespaces ("ns%T", "%RETRY%ns%G", "%DLQ%ns%G"), the per-group %RETRY% and %DLQ% topics, and
//     ACL Credentials.
//   - Remoting: the few requests rocketmq-client-go does not expose, or neither signs nor reports the
//     broker's answer for (the name server's cluster table, an ACL check by a signed heartbeat, a signed
//     topic creation), in the frames and signing of remoting protocol v1 the client uses.
//   - Administration: creating a topic explicitly (the local broker runs with autoCreateTopicEnable=false),
//     the topic's route, and probing a topic with one test send, through rocketmq-client-go's admin and
//     producer clients, so it works against 4.x and 5.x brokers (no gRPC proxy needed).
//
// The topic creation (EnsureTopicState, MakeReadable) is the one implementation behind the public package
// topics; the consumer, dlq, outbox and topics packages and cmd/rmqguard call this package directly.
package rmq
