// Command rmqguard is the operator CLI of the rmqguard project.
//
// Commands so far:
//
//	rmqguard topic ensure --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911 --queues 4 TOPIC...
//	rmqguard probe --namesrv 127.0.0.1:9876 --topic RMQGUARD_PROBE
//
// --namesrv defaults to $RMQGUARD_NAMESRV and --broker to $RMQGUARD_BROKER_ADDR; when neither flag nor
// variable is set the command fails. The exit code is 0 on success and 1 on any failure (the error is printed
// to stderr).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "rmqguard: error:", err)
		os.Exit(1)
	}
}
