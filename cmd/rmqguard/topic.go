package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/topics"
)

func newTopicCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Manage topics",
	}
	cmd.AddCommand(newTopicEnsureCmd(g))
	return cmd
}

func newTopicEnsureCmd(g *globalOptions) *cobra.Command {
	var (
		broker string
		queues int
	)
	cmd := &cobra.Command{
		Use:   "ensure TOPIC...",
		Short: "Create topics that have no route yet; print created, exists or updated per topic",
		Long: "Create each TOPIC on the broker with --queues read and write queues and perm 6 (read+write),\n" +
			"but only when the name server has no route for it, then wait until the route is visible.\n" +
			"An existing topic is never re-created: its queue counts stay as they are, and so does its perm,\n" +
			"except a write-only %DLQ% topic, which is made readable (perm 6).\n" +
			"Prints one line per topic: \"topic T: created\", \"topic T: exists\" or \"topic T: updated\".",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("no topic: usage: rmqguard topic ensure [--queues N] TOPIC...")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// A missing or invalid setting is a usage error (exit 2), found before the broker is asked.
			ns, err := g.requireNameServers()
			if err != nil {
				return usageError("%w", err)
			}
			if broker == "" {
				return usageError("no broker: pass --broker host:port or set %s", envBrokerAddr)
			}
			if queues < 1 {
				return usageError("--queues %d: must be at least 1", queues)
			}
			if err := g.access.validate(); err != nil {
				return usageError("%w", err)
			}
			cluster := topics.Cluster{NameServers: ns, Broker: broker, Namespace: g.access.namespace,
				Credentials: g.access.credentials()}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			for _, topic := range args {
				res, err := topics.Ensure(ctx, cluster, topics.Topic{Name: topic, Queues: queues})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "topic %s: %s\n", topic, res[0].State)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&broker, "broker", os.Getenv(envBrokerAddr),
		"master broker address host:port that holds new topics (default $"+envBrokerAddr+")")
	cmd.Flags().IntVar(&queues, "queues", 4, "read and write queue count of a new topic")
	return cmd
}
