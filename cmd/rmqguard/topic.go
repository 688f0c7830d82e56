package main

import (
	"context"
	"fmt"

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
		brokers []string
		queues  int
	)
	cmd := &cobra.Command{
		Use:   "ensure [--broker host:port]... TOPIC...",
		Short: "Create topics on every master broker that lacks them; print created, exists or updated per broker",
		Long: "Create each TOPIC with --queues read and write queues and perm 6 (read+write) on each master broker\n" +
			"that holds no queue of it — every master the name server lists, or those named with --broker — then\n" +
			"wait until the route shows it. Each master holds its own queues of a topic: one that exists on one\n" +
			"master is still created on another. Where it exists it is never re-created: its queue counts stay as\n" +
			"they are, and so does its perm, except a write-only %DLQ% topic, which is made readable (perm 6).\n" +
			"Prints one line per topic and broker: \"topic T on BROKER (host:port): created\", \"exists\" or \"updated\".",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("no topic: usage: rmqguard topic ensure [--broker host:port]... [--queues N] TOPIC...")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// A missing or invalid setting is a usage error (exit 2), found before the broker is asked.
			ns, err := g.requireNameServers()
			if err != nil {
				return usageError("%w", err)
			}
			if queues < 1 {
				return usageError("--queues %d: must be at least 1", queues)
			}
			if err := g.access.validate(); err != nil {
				return usageError("%w", err)
			}
			cluster := topics.Cluster{NameServers: ns, Brokers: brokers, Namespace: g.access.namespace,
				Credentials: g.access.credentials()}
			if err := cluster.Validate(); err != nil {
				return usageError("%w", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			for _, topic := range args {
				res, err := topics.Ensure(ctx, cluster, topics.Topic{Name: topic, Queues: queues})
				for _, r := range res { // with an error: the brokers done before it
					for _, b := range r.Brokers {
						fmt.Fprintf(cmd.OutOrStdout(), "topic %s on %s\n", topic, b)
					}
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&brokers, "broker", nil,
		"master broker host:port to create on (repeatable); default every master the name server lists")
	cmd.Flags().IntVar(&queues, "queues", 4, "read and write queue count of a new topic")
	return cmd
}
