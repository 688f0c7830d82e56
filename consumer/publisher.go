package consumer

import (
	"fmt"
	"io"
	"reflect"
)

// DeadLetterPublisherFunc builds a consumer's DeadLetterSink from its Config (name servers, group,
// namespace, credentials) when Start runs; dlq.ForConsumer is the one rmqguard provides. It returns the
// sink, or an error that fails Start.
type DeadLetterPublisherFunc func(cfg Config) (DeadLetterSink, error)

// WithDeadLetterPublisher makes Start build the consumer's DeadLetterSink with f — after the topics
// (WithEnsureTopics) and before the client starts — and Shutdown close it when it implements io.Closer,
// so the publisher and its producer live and die with the consumer:
//
//	consumer.New(cfg, h, consumer.WithDeadLetterPublisher(dlq.ForConsumer))
//
// f's error fails Start (wrapped, naming the step); a Start that fails after f succeeded closes the sink.
// It takes the place of WithDeadLetterSink: New fails when both are given, and when f is nil.
func WithDeadLetterPublisher(f DeadLetterPublisherFunc) Option {
	return func(o *options) { o.publisher, o.publisherGiven = f, true }
}

// checkSinkOptions is New's check of WithDeadLetterSink and WithDeadLetterPublisher: one of them at most,
// and no nil sink behind a non-nil interface (the *dlq.Publisher of a StartPublisher that failed, whose
// error was dropped), which would fail every dead letter instead of the construction.
func checkSinkOptions(o options) error {
	if o.publisherGiven && o.publisher == nil {
		return &ConfigError{Field: "WithDeadLetterPublisher", Problem: "the function is nil (dlq.ForConsumer builds the publisher from the Config)"}
	}
	if o.sink != nil && o.publisher != nil {
		return &ConfigError{Field: "WithDeadLetterSink", Problem: "given with WithDeadLetterPublisher: a consumer has one dead-letter sink, keep one of them"}
	}
	if o.sink != nil {
		if v := reflect.ValueOf(o.sink); v.Kind() == reflect.Pointer && v.IsNil() {
			return &ConfigError{Field: "WithDeadLetterSink", Problem: fmt.Sprintf(
				"the sink is a nil %T: check the error of the call that built it (dlq.StartPublisher?)", o.sink)}
		}
	}
	return nil
}

// startPublisher builds the sink of WithDeadLetterPublisher, once; a sink already there (a Start before
// this one built it) is kept. built reports whether this call built it: only then may a failed Start close it.
func (c *Consumer) startPublisher() (built bool, err error) {
	if c.publisher == nil || c.sink != nil {
		return false, nil
	}
	sink, err := c.publisher(c.cfg)
	if err != nil {
		return false, fmt.Errorf("rmqguard consumer %s: start: dead-letter publisher: %w", c.cfg.Group, err)
	}
	if sink == nil {
		return false, fmt.Errorf("rmqguard consumer %s: start: dead-letter publisher: the publisher function returned no sink", c.cfg.Group)
	}
	c.sink = sink
	return true, nil
}

// closePublisher closes the sink startPublisher built, after the Start that built it failed later (built);
// a sink an earlier Start built is the running consumer's and stays.
func (c *Consumer) closePublisher(built bool) {
	if !built || c.sink == nil {
		return
	}
	if closer, ok := c.sink.(io.Closer); ok {
		_ = closer.Close()
	}
	c.sink = nil
}
