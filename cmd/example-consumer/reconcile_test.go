package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/examples/shop"
	"github.com/rmqguard/rmqguard/examples/shop/shoptest"
	"github.com/rmqguard/rmqguard/internal/testenv"
)

// `example-consumer reconcile` against the real MariaDB: a seeded run reconciles (exit 0, the ok line);
// after a balance is corrupted it prints the difference and the FAILED line and fails (exit 1).
func TestReconcileCommand_PrintsDifferencesAndExitCode(t *testing.T) {
	db := shoptest.MySQL(t)
	run := testenv.Unique("rc")
	s, err := shop.New()
	require.NoError(t, err)
	require.NoError(t, s.Apply(t.Context(), db, shop.Seed{Run: run,
		Stock: map[string]int64{run + "-sku": 10}, Accounts: map[string]int64{run + "-acct": 500}}))
	reconcileCmd := func() (string, error) {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"reconcile", "--mysql-dsn", testenv.Env("RMQGUARD_TEST_MYSQL_DSN", testenv.DefaultMySQLDSN),
			"--prefix", run + "-", "--group", run + "-cg"})
		err := root.Execute()
		return out.String(), err
	}

	out, err := reconcileCmd()
	require.NoError(t, err)
	assert.Equal(t, "reconcile: ok accounts=1 skus=1\n", out)

	_, err = db.Exec(`UPDATE account SET balance = balance - 1 WHERE account_id = ?`, run+"-acct")
	require.NoError(t, err)
	out, err = reconcileCmd()
	require.ErrorIs(t, err, errReconcile, "main exits 1 on any error")
	assert.Equal(t, "account "+run+"-acct: balance 499 ≠ sum of its 1 transactions 500 (off by -1)\nreconcile: FAILED 1 differences\n", out)
}
