package rmq

import (
	"context"
)

// EnsureGroupTopics creates a consumer group's retry topic (%RETRY%<group>) and dead-letter topic
// (%DLQ%<group>) with one readable and writable queue each (perm 6), when they do not exist yet.
//
// The broker would create both on first use, but a consumer only notices a topic that appears after it
// started on its next route refresh (30 s in rocketmq-client-go), which delays the first retries by that
// much; and brokers before 4.9.2 create the DLQ write-only (perm 2), which the replay tool cannot read.
// A write-only DLQ is made readable. brokerAddr "" means every master broker. Errors are EnsureTopicState's.
// With WithNamespace(ns) the topics are %RETRY%ns%group and %DLQ%ns%group.
func EnsureGroupTopics(ctx context.Context, nameServers []string, brokerAddr, group string, opts ...Option) error {
	ns := newAccess(opts).namespace
	for _, topic := range []string{NamespacedRetryTopic(ns, group), NamespacedDLQTopic(ns, group)} {
		if _, err := EnsureTopicState(ctx, nameServers, brokerAddr, topic, 1, opts...); err != nil {
			return err
		}
	}
	return nil
}
