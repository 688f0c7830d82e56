// Command example-consumer is rmqguard wired for the example order/inventory domain of chapter 13.
//
//	example-consumer run    consume OrderCreated events through the full middleware chain; serve /metrics
//	example-consumer demo   send a workload with duplicates, failures and a poison message, then verify
//	                        against MariaDB, /metrics and the DLQ that every event took effect once
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
