package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/internal/rmq"
)

func newProbeCmd(g *globalOptions) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "probe (--topic TOPIC | TOPIC)",
		Short: "Send one test message to TOPIC and check that the broker answers SEND_OK",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, err := g.requireNameServers()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if topic != "" && topic != args[0] {
					return fmt.Errorf("two topics given: --topic %s and %s", topic, args[0])
				}
				topic = args[0]
			}
			if topic == "" {
				return errors.New("no topic: pass --topic TOPIC or TOPIC")
			}
			access, err := g.adminOptions()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			if err := rmq.Probe(ctx, ns, topic, access...); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "probe %s: SEND_OK\n", topic)
			return nil
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "topic to send the probe message to (must exist)")
	return cmd
}
