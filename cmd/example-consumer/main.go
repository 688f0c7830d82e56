// Command example-consumer is rmqguard wired for an example business domain: orders
// (WAIT_PAY → PAID | CANCELLED, versioned), inventory and accounts.
//
//	example-consumer run        consume OrderCreated, OrderPaid, PaymentCaptured and OrderCancelled through the
//	                            full middleware chain (version check included); a paid order's follow-ups go
//	                            through the outbox (relayed in-process): LoyaltyPointsCredited, applied by the
//	                            group <group>-loyalty, and a notification to notify-receiver; serve /metrics
//	example-consumer demo       seed stock and accounts, send the domain's events with duplicates, reordering,
//	                            late events, a racing compensation job and a poison message, then verify
//	                            against MariaDB, /metrics and the DLQ that every event took effect once, and
//	                            reconcile
//	example-consumer reconcile  check balances, stock, orders, loyalty points and dedup rows against each other
//	example-consumer notify-receiver
//	                            receive the notifications on 127.0.0.1, counting calls per idempotency key
//
// Settings come from flags, with defaults from the environment (see deploy/local/env.sh).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "example-consumer:", err)
		os.Exit(1)
	}
}
