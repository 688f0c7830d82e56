package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// SKELETON: replaced by the dlq work of issue 6.
func newDLQListCmd(_ *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "(not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("dlq list: not built yet") },
	}
}
