// Package dlq routes messages to a consumer group's dead-letter queue, %DLQ%<group>, with the reason
// attached, and counts the letters waiting there. It serves the consumer's process: the Publisher (a
// consumer.DeadLetterSink), the Monitor (the DLQ depth as a metric) and Migrate (the replay audit table the
// Monitor reads). Operators list, export and replay letters with the CLI, `rmqguard dlq` (docs/dlq-and-replay.md).
//
// # Namespaces
//
// On a cluster with ACL or a namespace, StartPublisher builds its producer with the name servers, the
// credentials and the producer group in the namespace, and no client namespace option (the client would
// prefix the already complete "%DLQ%<ns>%<group>" once more). A producer given to NewPublisher must be built
// the same way. The consumer sets Delivery.Namespace from Config.Namespace. Given to
// consumer.WithDeadLetterSink, the Publisher is closed by the consumer's Shutdown (the consumer closes a
// sink that implements io.Closer).
//
// # The DLQ census
//
// A Monitor reads the whole DLQ on every master broker the name servers list, and counts the letters that
// no replay has sent and whose event the group has not processed (the dedup table, in DB). A census that
// fails or reads the DLQ only in part removes the series until one succeeds again (a partial count would
// read as letters replayed, then as new letters). So does a census that misses a broker where the Monitor
// last counted waiting letters and that is no longer listed as a master: a master that is down is
// forgotten by the name server, and the scan of the others looks complete. Such a broker is forgotten after
// an hour (the alert's window; removed for good, say): the count without it is exported from then on.
package dlq
