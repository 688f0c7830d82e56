// Package consumer wraps the push consumer of rocketmq-client-go/v2: New builds a Consumer from a Config
// and a Handler, Run (or Start and Shutdown) drives it, and every message's Outcome becomes the client's
// answer in one place (see "Answer"). Each message's final decision is reported once, to the Observer and in one
// log line. The sections below hold the rules the exported names' short comments refer to.
//
// # New
//
// New validates cfg (an error "consumer config: <Field>: <problem>" per bad field, joined) and builds the client's push consumer with
// cfg's group, name servers, instance name, MaxReconsumeTimes, goroutines, batch size and consume
// timeout, and with Orderly the client's orderly consumption and SuspendTime. It subscribes every topic but does not start consuming: call Start.
// A nil h is such an error (Field "Handler"); a refused or pending h (dedup.Handle(nil) is refused;
// middleware.Chain returns an incomplete chain pending) is its error wrapped as "consumer.New: handler:
// <err>". New recognises those by their types and never calls a handler of yours. A chain's condition (a chain around a
// dedup store) and a WithHealthProbe probe with a CheckConcurrency method (*dedup.Store) are checked
// against the most handlers the consumer runs at once (ConsumeGoroutines for each subscribed topic and
// %RETRY%<group>; 0 in orderly mode, which runs one per queue it holds; internal/pending's doc holds the
// mechanism): a store whose transactions could hold every connection of the pool its handlers also
// use fails New with the fix ("consumer.New: handler: dedup: …"); so does a middleware.Lease whose lease is
// not longer than HandlerTimeout, or with BatchSize > 1 (a condition's CheckConfig).
//
// # Run
//
// Run starts the consumer, consumes until ctx ends (e.g. signal.NotifyContext on SIGINT/SIGTERM), then
// shuts it down, and is the whole life of a consumer in a service's main:
//
//	return c.Run(ctx)
//
// It returns Start's error at once (after a Shutdown that releases what Start had begun); else, when ctx
// ends, Shutdown's error: nil after a clean stop, context.DeadlineExceeded wrapped when handlers still
// running at Config.DrainTimeout had to be cancelled (their messages come back after a restart, no attempt
// spent). ctx's own end is the normal way to stop and is not an error. Shutdown runs on a context of its
// own, bounded by DrainTimeout (plus up to 5 s for cancelled handlers to return, and the client's
// shutdown), not on the ended ctx. A Consumer runs once: Run after a Shutdown (or a Run that returned)
// returns an error ("rmqguard consumer: stopped") at once.
//
// # Shutdown
//
// Shutdown stops the lag poller, stops taking new deliveries (the client is suspended; messages it had already fetched are not
// handled, and come back after a restart with ReconsumeTimes unchanged), waits for in-flight handlers up to
// DrainTimeout or ctx's end, whichever comes first, then cancels what still runs (their transactions roll
// back) and shuts the client down, which persists the committed offsets. A message whose handler was
// cancelled, or that was waiting for the store, is not answered at all (never dead-lettered, its attempt
// not spent): it comes back after a restart as it was. A store health gate that is closed stays closed:
// the client is never resumed. WithBackground's functions are stopped after the client. The consumer's own dead-letter producer, if started, is shut down last,
// and then a DeadLetterSink that implements io.Closer is closed.
// It returns the client's shutdown error, or context.DeadlineExceeded wrapped when handlers had to be
// cancelled. The consumer's ZSTD decoder is freed once the client is down. Calling it twice is safe. A
// client that Start never started (no Start, or one that failed before the client) is not shut down.
//
// # Answer
//
// A message's answer to the broker is made in one place, from its Outcome and the chain's error, if any.
// The DLQ delay level is -1: a DelayLevelWhenNextConsume that makes the broker move the message straight
// to %DLQ%<group>.
//
// Concurrent: processed, duplicate, stale, dead-lettered and unsubscribed → ConsumeSuccess; retry and
// unset → ConsumeRetryLater with the outcome's delay level; dead letter → ConsumeRetryLater with
// the DLQ delay level; unavailable → ConsumeRetryLater with level 0 (the consumer resolves it only when its
// wait for the store passed Config.OutageWait: then the broker counts an attempt, and dead-letters the
// message if that was its last delivery). An error with a
// success kind is treated as a retry: an error never acknowledges.
//
// Orderly: successes (dead-lettered included) → ConsumeSuccess; anything else, a dead letter not yet
// published too, → SuspendCurrentQueueAMoment: the client's orderly path does not handle
// ConsumeRetryLater (it takes the next messages and later commits past the failed one: a loss) and has
// no DLQ delay level, so the consumer publishes every orderly dead letter itself before acknowledging it
// (Config.Orderly); its callback sets the suspension (Config.SuspendTime) on the orderly context.
//
// # Decision
//
// Decision is the consumer's final word on one message, reported once through Observer.Decided: what the
// broker was told, after the callback's outcomes were combined (a batch is acknowledged or retried as a
// whole) and its dead letters published. "The outcome is decided once, and everyone reports that
// decision": metrics and the consumer's log line follow it, not the chain's intermediate opinion.
//
// Outcome.Kind, the final outcome, is:
//   - the message's own outcome when it acknowledges the message (processed, duplicate, stale,
//     dead_lettered: published to %DLQ%<group> with its reason and accepted, unsubscribed), even when
//     its batch was retried (BatchRetried: it comes back, as a duplicate);
//   - dead_letter when the broker moves the message to %DLQ%<group> itself: a single dead letter answered
//     with the DLQ delay level (no DeadLetterSink, or its publish failed), or a message not acknowledged on its
//     last delivery (Attempt == MaxAttempts: the broker dead-letters a retry then); never in orderly
//     mode, where the consumer publishes every letter itself (dead_lettered) and a message not
//     acknowledged is suspended and handled again (retry, unavailable or unset);
//   - unavailable when it waited OutageWait for the store and was answered ConsumeRetryLater (an attempt
//     spent because of the outage);
//   - unset when the chain decided nothing and returned no error (retried);
//   - retry otherwise: a retry, an error, a dead letter whose batch was retried (because of a
//     neighbour, or because its own publish failed within OutageWait; it is published when the batch is
//     acknowledged), or in orderly mode a batch member not handled because one before it was not
//     acknowledged (Chain is then that retry too: the chain did not run).
//
// Outcome.Cause is always set for duplicates (redelivery, resend, replay: the chain's, read from the dedup
// row; else "unknown", never a guess) and dead letters (a reason class; the chain's, else "permanent"
// for a dead letter the chain decided and "exhausted" for one the broker makes on the last delivery).
//
// # Cause
//
// Outcome.Cause refines an Outcome with why it happened, from a small fixed set of strings, so that it can
// label metrics (rmqguard_duplicates_total{cause}, rmqguard_dead_letters_total{reason}) without unbounded
// label values. Its meaning depends on the Kind:
//
//   - KindDuplicate: why the event came again, as read from the dedup row: "redelivery" (the same
//     message ID: a lost offset commit, a consume-timeout resend, a rebalance, a retried batch), "resend"
//     (another message ID: the producer sent the event again) or "replay" (the message carries the
//     RMQGUARD_REPLAY_ID property); "unknown" when it could not be read (or a fast path kept no message
//     ID): the message alone cannot tell them apart;
//   - KindDeadLetter and KindDeadLettered: the dead letter's reason class: "permanent" (a
//     retry.Permanent error, a MySQL data error, a handler's own DeadLetter), "unidentifiable" (no event
//     ID), "version_gap" (middleware.Version's gap policy), "exhausted" (still failing on the last
//     delivery), "panic", "timeout", "lease_held" (another delivery held a live middleware.Lease), or
//     "other" (any other reason, and any Cause outside this set);
//   - KindRetry: what the retry is for, when known ("panic", "timeout", "lease_held"); if the retry
//     happens on the message's last delivery the broker dead-letters it, and this becomes the letter's
//     reason class;
//   - KindProcessed: "takeover" when the delivery took over the expired lease of one that never
//     finished (middleware.Lease); empty otherwise.
//
// The empty Cause means "not known"; the consumer fills it in its final decision (see Decision).
//
// # MaxAttempts
//
// MaxAttempts is the client's MaxReconsumeTimes (WithMaxReconsumeTimes, not WithRetry): a message is
// delivered at most MaxAttempts+1 times (ReconsumeTimes 0..MaxAttempts), then the broker moves it to
// %DLQ%<group>. Default 16, the client's own default for concurrent consumption; 1..1000.
//
// Orderly: the same MaxAttempts+1 deliveries, but the count is the client's, kept in memory: a failed
// message stays at the head of its queue and the client raises its ReconsumeTimes by one per failure
// (nothing goes through %RETRY%<group>). Only the message's own failure spends one (an unavailable
// store, a failed dead-letter publish, a neighbour in its batch do not). On the last delivery
// (Attempt == MaxAttempts) a message still failing is published to %DLQ%<group> by the consumer
// itself, with its reason, and then acknowledged, so the queue moves on. The count starts again at 0
// when the queue's messages are fetched anew: after a restart, or when a rebalance gives the queue to
// another consumer. (The client's own orderly default would be unlimited: a poison message would hold
// its queue forever.)
//
// # BatchSize
//
// BatchSize is ConsumeMessageBatchMaxSize: messages per callback. Default 1; 1..1024. A batch is
// acknowledged or retried as a whole by the client. Above 1 each member's handler context carries the
// callback's scope (see Batch), through which middleware.Dedup gives the members one shared
// transaction (one claim statement and the handlers after the last member, a careful pass with a
// savepoint each when one is not kept, one COMMIT; the batch's context has the deadline HandlerTimeout ×
// members); with 1, and in a callback that holds one message, each message has its own transaction.
// Orderly: a batch is up to BatchSize consecutive messages of one queue, acknowledged or suspended as a
// whole; the members behind one that is not acknowledged (and not a dead letter) are not handled in
// that callback, and spend no attempt, so that none takes effect before it. Its dead letters are
// published only when every other member is acknowledged, as in a concurrent batch.
//
// # Batch
//
// With BatchSize > 1 the members of one callback are handled one after another, never at once, and share
// what middlewares attach to the callback's scope (middleware.Dedup's one transaction), finished once after
// the last member, before any dead letter is published or any decision reported. A callback is handled
// in passes: an optimistic first one, whose shared resource may defer the members' work to its finish
// (middleware.Dedup claims them in one statement and runs their handlers there) and asks for a careful
// pass when a member is not kept; then careful ones, which decide each member while it is handled. The
// scope's context derives from the consumer's run context, so Shutdown ends it, with a deadline of
// HandlerTimeout × the members. A shared resource lost to the store (a broken connection, a failed
// COMMIT, or waits at the store gate that outlasted that deadline) makes the consumer wait at the gate and
// handle the whole callback again, spending no attempt, within OutageWait; any other failure of it
// retries the members that depended on it.
//
// # OutageWait
//
// OutageWait bounds how long one callback waits for the store to come back once a handler reported
// it unavailable (KindUnavailable, e.g. MySQL down or read-only), and how long a batch retries a failed
// dead-letter publish. While it waits the message's attempt is not spent; past it the message is
// answered ConsumeRetryLater, which spends one (and on the message's last delivery the broker then
// moves it to %DLQ%<group>). Orderly: past it the queue is suspended for SuspendTime and the message
// handled again, without spending an attempt (it cannot be skipped, and its failure is the store's). Default 5 min, or ConsumeTimeout / 3 when that is less; it must be below
// ConsumeTimeout. Keep OutageWait + 2 × HandlerTimeout (a run before the outage is seen, one after it)
// below ConsumeTimeout too: past ConsumeTimeout the client itself sends the message back (a second copy,
// which dedup then sees as a duplicate) while its callback still runs.
//
// # Health gate
//
// WithHealthProbe gives the store health gate a probe. When a handler reports the store unavailable
// (KindUnavailable), pulling is suspended and p is probed with backoff (100 ms doubling to 5 s, each call
// bounded by 5 s) until it returns nil; then pulling resumes and the waiting messages are handled again.
// Default: the dedup store of the handler's middleware.Chain (a *dedup.Store, or a layer forwarding its
// Probe), when it has one; WithHealthProbe(nil) turns the probe off. Without a probe the gate reopens after
// the same backoff and the handlers themselves are the probe: if the store is still down the gate closes
// again with the next, longer backoff (each reopening and closing is logged).
//
// # Dead letters
//
// DeadLetterSink publishes a message to %DLQ%<group> with the reason attached. DeadLetter returns nil
// only when the broker accepted the copy; then the original is acknowledged. On error, a single message
// falls back to the broker's own dead-lettering (ConsumeRetryLater with the DLQ delay level); in a batch the
// publish is retried with backoff within OutageWait, then the whole batch is retried (the DLQ delay level would
// take the processed neighbours along); in orderly mode a single message's queue is suspended for
// SuspendTime and the message handled again, without spending an attempt. Either way the message is
// never acknowledged without a DLQ entry.
//
// # Logs
//
// WithLogger sets the logger for the consumer's own lines. Default: zap.NewProduction(), JSON lines on stderr
// at info and above.
//
// Each message gets one line, at its final decision (what the broker was told, after a batch is combined
// and its dead letters published; a batch handled twice or a run repeated after a wait for the store
// still logs one line per message), with group, topic, msg_id, event_id, attempt (ReconsumeTimes),
// outcome (Kind's label), duration (Decision.Elapsed) and, when set, cause, reason, error, chain_outcome
// (when the chain said something else) and batch_retried; never the body. Its level:
//   - debug: processed, duplicate, stale, unsubscribed;
//   - info: a retry, or a member acknowledged by its own outcome whose batch is retried;
//   - warn: a retry whose next delivery is the last (Attempt+1 >= MaxAttempts), a retry on the last
//     delivery (orderly mode), the store unavailable (KindUnavailable, or a batch's shared resource lost
//     to the store), or a dead letter that could not be published and is retried;
//   - error: a dead letter (dead_lettered, dead_letter), or a handler that returned the zero Outcome and
//     no error.
//
// Besides, the consumer logs its events: start and stop, store pauses (warn) and resumptions, a batch
// handled again, failed dead-letter publishes. It turns off zap's automatic stack traces on l (zap's
// production config adds a "stacktrace" to every error line): its own call sites say nothing about a
// message. Mind zap's sampler (zap.NewProductionConfig samples per level and message text: the first 100
// lines a second, then one in 100): it drops retry and dead-letter lines in a burst; sample debug only.
//
// # Traces
//
// With WithTracerProvider each message has one span ("process <topic>", kind Consumer) from its callback's
// entry to its decision: the child of the W3C traceparent/tracestate of its properties (propagation.TraceContext;
// none: a new trace), the parent of its handler's context on every run, ended once with the final Decision
// (rmqguard.outcome, rmqguard.cause, rmqguard.event_id; status Error, with the reason, unless acknowledged as
// done), or with rmqguard.unanswered when left unanswered at shutdown. Attributes: docs/operations.md, "Traces".
//
// # Typed handlers
//
// HandleJSON returns a Handler that decodes each JSON body into a new T (DecodeAs with JSON{}) and calls
// fn with it. Use it for handlers that do not write through the dedup transaction (e.g. ones that call an
// idempotent HTTP API); a handler that writes through it uses dedup.HandleJSON. fn gets the whole
// delivery too: the event ID is d.EventID (filled by middleware.EventID, not taken from msg), and
// d.Msg.Body is still the raw body; its results mean what a Handler's do. For another codec, call
// DecodeAs in your handler: it returns the outcome to return when the body does not decode.
//
// T is the message's value type, e.g. a struct: the codec decodes into a *T, and fn gets the T. A body the
// codec cannot decode (for JSON also an empty body and null) never reaches fn: the handler returns a dead letter
// (KindDeadLetter, "permanent", reason "undecodable body: …") and a permanent error wrapping
// ErrUndecodableBody, so the message goes to %DLQ%<group> at once instead of being retried, on every
// delivery.
//
// A nil fn is a wiring mistake: HandleJSON panics at construction, naming it, rather than failing every
// message.
//
// DecodeAs decodes d.Msg.Body into a new T with codec; it is the decode step of every typed handler
// (HandleJSON, dedup.HandleWith), for handlers that route several types or use another codec. On success it returns
// the T, the zero Outcome and nil. When T is a pointer type, a body the codec decodes to a nil T (JSON
// "null") counts as undecodable ("the body decodes to a nil *Order"): the handler would dereference it.
// When the codec fails it returns the zero T, the outcome to return —
// DeadLetter("undecodable body: <the codec's error>") with Cause "permanent" — and that error, marked
// retry.Permanent and wrapping ErrUndecodableBody and the codec's error (errors.Is/As reach both). codec
// must not be nil.
//
// # JSON
//
// JSON is the Codec of JSON bodies (encoding/json), the default of the typed handlers (HandleJSON). Its
// zero value is ready to use and it holds no state.
//
// Fields of the body that the target type does not have are ignored, not refused: producers evolve, and a
// producer that adds a field must not break the consumers that do not know it yet. A leading UTF-8
// byte-order mark is skipped (RFC 8259 lets a parser ignore it, and some producers write one). Anything
// after the JSON value other than white space, an empty body, a body that is the JSON literal null, and a
// value of the wrong JSON type for a field are errors. null is refused because encoding/json would leave
// the target at its zero value without an error, and a handler would then apply an empty event (an order
// with no number) instead of the message going to the DLQ.
package consumer
