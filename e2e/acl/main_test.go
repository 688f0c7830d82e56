// Package acl_test runs rmqguard against a broker with ACL 2.0 on, started by the package itself
// (internal/testenv.ACLBroker on 19886/20921, never the shared broker) and removed when its tests ran.
package acl_test

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The stack is started by the first test that needs it (testenv.ACLBroker); remove it once, here.
	if err := removeStack(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
