// Package outbox makes a consumer's outgoing messages and external effects as durable as its database
// writes: a handler records them in the dedup transaction, and a relay sends or runs them after COMMIT.
//
//	ob, _ := outbox.New(store, outbox.Config{NameServers: ns, Effects: map[string]outbox.EffectFunc{"notify": notify}})
//	c, _ := consumer.New(cfg, chain, consumer.WithBackground(ob.Run)) // the relay lives with the consumer
//	// in a dedup.Handle handler:
//	ob.Send(ctx, d, outbox.Message{Name: "points-credited", Topic: "LOYALTY", Body: body})
//	ob.Do(ctx, d, "notify", payload)
//
// The rules:
//
//   - A row exists exactly when the business writes do: it is inserted through the dedup transaction
//     (dedup.TxFromContext), so a rollback takes it away and nothing is ever sent for it.
//   - Each row has a stable event ID, "scope/incoming event ID/name" (or "ob-" and 40 hex digits of their
//     SHA-256 when that is longer than 128 characters or scope holds a '/'): the same on every retry
//     of the incoming event, so a name is used once per event (twice is a permanent error). A message
//     carries it as its EVENT_ID property and first key, so a downstream rmqguard consumer applies it once;
//     an effect gets it as Effect.IdempotencyKey.
//   - Send writes the W3C trace context of its ctx (the consumer's span with consumer.WithTracerProvider)
//     into the message's properties, traceparent and tracestate, unless Message.Properties has a traceparent:
//     the consumer of the relayed message continues the trace.
//   - Delivery is at least once. The relay sends with SendSync and marks a row sent only on SEND_OK; a
//     crash between the two sends it again, under the same event ID.
//   - The relay claims rows with SELECT … FOR UPDATE SKIP LOCKED and holds their locks while it sends, so
//     several relays, in one process or many, share a table without sending a row twice in the normal
//     course. It is woken by the commit of each Send or Do, and polls every PollInterval for rows
//     committed elsewhere. A round takes up to 256 rows; under a steady stream of commits it waits 20 ms
//     after a round that did not fill up, so that rows go in fewer, larger rounds.
//   - Per sharding key, rows go out in id order (the commit order of one aggregate's serialised
//     transactions): only the oldest unsent row of a key is due, so a key sends one row per relay round,
//     and a message's sharding key picks its queue (the client's hash selector's choice). A round's
//     messages go in one SendSync per queue (a RocketMQ batch, in id order, up to 1 MiB); a batch that
//     fails is sent again row by row, so that only a row the broker refuses is parked. Effects run up to
//     16 at once (so an effect function may be called concurrently) and have no order between them.
//   - A failed row waits (100 ms doubling to MaxBackoff); a failed send also backs the relay off as a
//     whole (a failed effect does not); rows are never dropped, parked or reordered while the broker is
//     down. A message that no resend can deliver (the topic does not exist while a master broker is
//     listed, the broker refuses the message, a body above 4 MiB: the broker's default maxMessageSize) is
//     parked with its reason; it holds back the later rows of its key, and only those. An effect
//     is parked after MaxEffectAttempts runs; a run that outlasts EffectTimeout counts as failed
//     even if the function ignores its context.
//   - A stopped relay records the results it already has: a row with SEND_OK is not sent again.
//   - A parked row stays until an operator acts: List shows it, Retry makes it pending again (rmqguard
//     outbox list|retry). Purge deletes sent rows after a retention window; pending and parked rows stay.
//   - `rmqguard outbox relay` sends messages from a process of its own; effects run only in a process
//     that registered their functions in Config.Effects.
package outbox
