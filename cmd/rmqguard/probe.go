package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/internal/rmqadmin"
)

func newProbeCmd(g *globalOptions) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "probe --topic TOPIC",
		Short: "Send one test message to TOPIC and check that the broker answers SEND_OK",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := g.requireNameServers()
			if err != nil {
				return err
			}
			if topic == "" {
				return errors.New("no topic: pass --topic TOPIC")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			if err := rmqadmin.Probe(ctx, ns, topic); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "probe %s: SEND_OK\n", topic)
			return nil
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "topic to send the probe message to (must exist)")
	return cmd
}
