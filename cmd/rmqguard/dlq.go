package main

import "github.com/spf13/cobra"

func newDLQCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Read, export, replay and edit-then-replay a consumer group's dead-letter queue (%DLQ%<group>)",
	}
	cmd.AddCommand(newDLQListCmd(g), newDLQShowCmd(g), newDLQExportCmd(g), newDLQReplayCmd(g), newDLQEditCmd(g))
	return cmd
}
