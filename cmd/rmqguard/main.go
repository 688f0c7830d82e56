// Command rmqguard is the operator CLI of the rmqguard project.
//
// Commands so far:
//
//	rmqguard topic ensure --namesrv 127.0.0.1:9876 --broker 127.0.0.1:10911 --queues 4 TOPIC...
//	rmqguard probe --namesrv 127.0.0.1:9876 --topic RMQGUARD_PROBE
//	rmqguard dedup purge --group G --older-than 168h [--batch 1000] [--dry-run] [--force] --mysql-dsn DSN
//
// --namesrv defaults to $RMQGUARD_NAMESRV, --broker to $RMQGUARD_BROKER_ADDR and --mysql-dsn to $RMQGUARD_MYSQL_DSN; when neither flag nor
// variable is set the command fails. Against a cluster with ACL or a namespace, every command takes
// --access-key, --secret-key and --namespace (else $RMQGUARD_ACCESS_KEY, $RMQGUARD_SECRET_KEY,
// $RMQGUARD_NAMESPACE, read when the command runs; the secret is never printed). A broker's ACL refusal
// reads "ACL: access denied / signature mismatch for access key …". The exit code is 0 on success and 1 on any failure (the error is printed
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
