package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jmoiron/sqlx"
	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/examples/shop"
)

// errReconcile is returned (exit 1) when the domain does not reconcile; the differences are printed.
var errReconcile = errors.New("the domain does not reconcile")

func newReconcileCmd(s *settings) *cobra.Command {
	var prefix string
	var noDedup bool
	cmd := &cobra.Command{
		Use:   "reconcile",
		Short: "check the domain: balances = sum of account transactions, stock on hand = sum of inventory changes, orders against their changes and payments, dedup rows against effects",
		Long: `reconcile checks, in the database of --mysql-dsn: per account SUM(account_transaction.amount) = balance; per
SKU inventory.on_hand = SUM(inventory_change.quantity); per order exactly one reservation of its quantity,
exactly one release when CANCELLED and none otherwise, and exactly one payment of its amount when PAID; and
that every SUCCESS processed_event row of --group has its effect (OrderCreated: the order; OrderPaid: a PAID
order; OrderCancelled: a CANCELLED order; PaymentCaptured: an account transaction with its event ID, or
linked to it in account_transaction_event when the payment was re-sent under a new event ID).
It prints each difference on a line, then "reconcile: ok accounts=N skus=M" or "reconcile: FAILED n
differences" (exit 1). Run it with the writers drained: it reads without locking.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if s.mysqlDSN == "" {
				return errors.New("--mysql-dsn (RMQGUARD_MYSQL_DSN) is required")
			}
			group := s.group
			if noDedup {
				group = ""
			}
			return reconcile(cmd.Context(), cmd.OutOrStdout(), s.mysqlDSN, shop.ReconcileScope{Group: group, Prefix: prefix})
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "check only accounts, SKUs, orders and event IDs starting with this (a demo run's ID and '-'); default: everything")
	cmd.Flags().BoolVar(&noDedup, "no-dedup", false, "skip the check of the group's processed_event rows against the effects")
	return cmd
}

// reconcile runs shop.Reconcile on the database at dsn and prints its report to out.
func reconcile(ctx context.Context, out io.Writer, dsn string, scope shop.ReconcileScope) error {
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer db.Close()
	rec, err := shop.Reconcile(ctx, db, scope)
	if err != nil {
		return err
	}
	printReconcile(out, rec)
	if !rec.OK() {
		return errReconcile
	}
	return nil
}

// printReconcile prints each difference on a line, then the verdict line, to out.
func printReconcile(out io.Writer, rec shop.ReconcileReport) {
	for _, d := range rec.Differences {
		fmt.Fprintln(out, d.String())
	}
	fmt.Fprintln(out, rec.Verdict())
}
