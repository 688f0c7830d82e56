package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

// ErrACL marks a broker's refusal of Config.Credentials (response code NO_PERMISSION: unknown access
// key, signature mismatch, none given, or a missing permission): Start's error matches it with errors.Is
// when a broker refuses the keys, and reads "… ACL: access denied / signature mismatch for access key
// <key> on broker <addr> (code 16: <remark>)".
var ErrACL = errors.New("ACL: access refused")

// accessCheckTimeout bounds Start's access check.
const accessCheckTimeout = 5 * time.Second

// checkAccess asks every master broker the name servers list whether it accepts cfg.Credentials (one
// signed heartbeat each), because rocketmq-client-go only logs refused heartbeats and pulls: a consumer with
// a wrong secret would start and never receive a message. It runs only when credentials are set, and
// before the client starts, so a refusal is returned with the client never started (Shutdown then leaves
// it alone). A name server or broker it cannot reach is logged and not held against the start (the client
// retries on its own, as without credentials).
func (c *Consumer) checkAccess() error {
	if rmq.Credentials(c.cfg.Credentials).IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.runCtx, accessCheckTimeout)
	defer cancel()
	err := rmq.CheckClusterAccess(ctx, c.cfg.NameServers, rmq.Credentials(c.cfg.Credentials))
	if rmq.IsACL(err) {
		return rmq.MarkACL(fmt.Errorf("rmqguard consumer %s: start: %w", c.cfg.Group, err), ErrACL)
	}
	if err != nil {
		c.log.Warn("ACL access check could not run; starting anyway", zap.String("group", c.cfg.Group), zap.Error(err))
	}
	return nil
}
