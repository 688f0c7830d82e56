package rmq

import (
	"context"
	"fmt"

	"github.com/apache/rocketmq-client-go/v2/admin"
)

// DeleteTopic deletes topic from the broker at brokerAddr and from the name servers, for tools that create
// throw-away topics (the end-to-end benchmark). Deleting a topic that does not exist is not an error on
// the broker side. opts give credentials and a namespace as for EnsureTopic. Errors from the admin client
// are wrapped with the topic's name.
func DeleteTopic(ctx context.Context, nameServers []string, brokerAddr, topic string, opts ...Option) error {
	if err := validateNameServers(nameServers); err != nil {
		return fmt.Errorf("delete topic %q: %w", topic, err)
	}
	acc := newAccess(opts)
	topic = acc.name(topic)
	adm, err := admin.NewAdmin(acc.adminOptions(nameServers)...)
	if err != nil {
		return fmt.Errorf("delete topic %q: new admin client: %w", topic, err)
	}
	defer adm.Close()
	if err := adm.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(brokerAddr),
		admin.WithNameSrvAddr(nameServers)); err != nil {
		return fmt.Errorf("delete topic %q: %w", topic, err)
	}
	return nil
}
