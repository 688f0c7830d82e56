package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// SKELETON: replaced by the dlq work of issue 6.
func newDLQExportCmd(_ *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "export",
		Short: "(not built yet)",
		RunE:  func(*cobra.Command, []string) error { return errors.New("dlq export: not built yet") },
	}
}
