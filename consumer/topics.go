package consumer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// ensureTopicsTimeout bounds the topic ensure in Start.
const ensureTopicsTimeout = 30 * time.Second

// ensureGroupTopics creates cfg's %RETRY%<group> and %DLQ%<group> topics on every master broker the name
// servers list, with cfg's namespace and credentials (see Config.SkipTopicEnsure). Errors name the topic,
// the broker that failed and the name servers; a broker that refuses the keys gives an error that wraps an *rmq.ACLError.
func ensureGroupTopics(ctx context.Context, cfg Config) error {
	err := rmq.EnsureGroupTopics(ctx, cfg.NameServers, "", cfg.Group,
		rmq.WithCredentials(rmq.Credentials(cfg.Credentials)), rmq.WithNamespace(cfg.Namespace))
	if err != nil {
		return fmt.Errorf("%w (name servers %s)", err, strings.Join(cfg.NameServers, ","))
	}
	return nil
}

// ensureTopics runs the topic ensure of Start, unless Config.SkipTopicEnsure, with a context that ends
// after 30 s or at Shutdown.
func (c *Consumer) ensureTopics() error {
	if c.cfg.SkipTopicEnsure {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.runCtx, ensureTopicsTimeout)
	defer cancel()
	if err := c.ensure(ctx, c.cfg); err != nil {
		return rmq.MarkACL(fmt.Errorf("rmqguard consumer %s: start: ensure topics: %w", c.cfg.Group, err), ErrACL)
	}
	return nil
}
