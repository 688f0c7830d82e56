// Command rmqguard is the operator CLI of the rmqguard project.
//
// Commands so far:
//
//	rmqguard topic ensure --namesrv 127.0.0.1:9876 [--broker 127.0.0.1:10911]... --queues 4 TOPIC...
//	rmqguard probe --namesrv 127.0.0.1:9876 --topic RMQGUARD_PROBE
//	rmqguard dedup purge --group G --older-than 168h [--batch 1000] [--dry-run] [--force] --mysql-dsn DSN
//	rmqguard dlq list|show|export --group G … (see rmqguard dlq --help)
//
// --namesrv defaults to $RMQGUARD_NAMESRV and --mysql-dsn to $RMQGUARD_MYSQL_DSN; when neither flag nor
// variable is set the command fails. Against a cluster with ACL or a namespace, every command takes
// --access-key, --secret-key and --namespace (else $RMQGUARD_ACCESS_KEY, $RMQGUARD_SECRET_KEY,
// $RMQGUARD_NAMESPACE, read when the command runs; the secret is never printed). topic ensure works on every
// master broker the name server lists, or on those named with --broker. A broker's ACL refusal
// reads "ACL: access denied / signature mismatch for access key …". Exit codes: 0 success, 1 a failure or
// an incomplete result, 2 a usage error (see exit.go); the error is printed to stderr.
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run executes the command line args and returns the process exit code, printing an error to stderr.
func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	var e *exitError
	if err != nil && (!asExitError(err, &e) || e.err != nil) {
		fmt.Fprintln(os.Stderr, "rmqguard: error:", err)
	}
	return exitCode(err)
}
