package console_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/stretchr/testify/assert"

	"github.com/rmqguard/rmqguard/internal/console"
	"github.com/rmqguard/rmqguard/internal/dlqtool"
	"github.com/rmqguard/rmqguard/topics"
)

// stubAudit and stubProcessed stand in for the database where New only checks that they are set.
type stubAudit struct{ dlqtool.Audit }
type stubProcessed struct{}

func (stubProcessed) Processed(context.Context, string, string) (bool, error) { return false, nil }

type stubSender struct{}

func (stubSender) SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error) {
	return nil, nil
}

// New refuses an invalid Config, naming the field and why; ReadOnly needs no sender and no operator.
func TestNew_RefusesAnInvalidConfigNamingTheField(t *testing.T) {
	valid := func() console.Config {
		return console.Config{Cluster: topics.Cluster{NameServers: []string{"127.0.0.1:9876"}}, Groups: []string{"cg"},
			Audit: stubAudit{}, Processed: stubProcessed{}, Sender: stubSender{}, Operator: "alice", Token: "0123456789abcdef"}
	}
	_, err := console.New(context.Background(), valid())
	assert.NoError(t, err)
	for want, change := range map[string]func(*console.Config){
		"invalid Cluster":                   func(c *console.Config) { c.Cluster = topics.Cluster{} },
		"invalid Groups: at least one":      func(c *console.Config) { c.Groups = nil },
		`"%DLQ%cg" is not a consumer group`: func(c *console.Config) { c.Groups = []string{"%DLQ%cg"} },
		"invalid Audit":                     func(c *console.Config) { c.Audit = nil },
		"invalid Processed":                 func(c *console.Config) { c.Processed = nil },
		"invalid Token: at least 16":        func(c *console.Config) { c.Token = "short" },
		"invalid Sender":                    func(c *console.Config) { c.Sender = nil },
		"invalid Operator":                  func(c *console.Config) { c.Operator = " " },
	} {
		c := valid()
		change(&c)
		_, err := console.New(context.Background(), c)
		assert.ErrorContains(t, err, want)
	}
	c := valid()
	c.ReadOnly, c.Sender, c.Operator = true, nil, ""
	_, err = console.New(context.Background(), c)
	assert.NoError(t, err, "read-only sends nothing and records no operator")
}
