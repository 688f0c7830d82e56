package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/spf13/cobra"
)

// Environment variables that provide flag defaults.
const (
	envNameServer = "RMQGUARD_NAMESRV" // comma-separated name server addresses, e.g. 127.0.0.1:9876
)

// globalOptions are the flags shared by every command.
type globalOptions struct {
	nameServers []string
	timeout     time.Duration
	logLevel    string
	access      accessFlags
}

func newRootCmd() *cobra.Command { return newRootCmdWith(&globalOptions{}) }

// newRootCmdWith builds the command tree on opts, which the global flags fill.
func newRootCmdWith(opts *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:           "rmqguard",
		Short:         "Operator tools for rmqguard and its RocketMQ cluster",
		SilenceUsage:  true,
		SilenceErrors: true, // main prints the error once
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// The client logs through rlog (logrus, info level by default); keep the CLI's output readable.
			rlog.SetLogLevel(opts.logLevel)
			opts.access.fromEnv(cmd.Flags())
			return nil
		},
	}
	// A bad flag or value is a usage error (exit 2), as are the commands' own argument checks.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: exitUsage, err: err} })
	root.PersistentFlags().StringSliceVar(&opts.nameServers, "namesrv", splitList(os.Getenv(envNameServer)),
		"name server addresses host:port, comma-separated (default $"+envNameServer+")")
	root.PersistentFlags().DurationVar(&opts.timeout, "timeout", 30*time.Second,
		"overall time limit of the command")
	root.PersistentFlags().StringVar(&opts.logLevel, "client-log-level", "fatal",
		"log level of the RocketMQ client library: debug, info, warn, error, fatal")

	opts.access.register(root.PersistentFlags())

	root.AddCommand(newTopicCmd(opts), newProbeCmd(opts), newDedupCmd(opts), newDLQCmd(opts), newOutboxCmd(opts),
		newConsoleCmd(opts))
	return root
}

// requireNameServers returns the configured name servers or an error naming the flag and variable to set.
func (o *globalOptions) requireNameServers() ([]string, error) {
	ns := make([]string, 0, len(o.nameServers))
	for _, s := range o.nameServers {
		if s = strings.TrimSpace(s); s != "" {
			ns = append(ns, s)
		}
	}
	if len(ns) == 0 {
		return nil, errors.New("no name server: pass --namesrv host:port or set " + envNameServer)
	}
	return ns, nil
}

// splitList splits a comma-separated list, dropping blanks; "" gives nil.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// commandContext is the context of a long-running command: cancelled by Ctrl-C or SIGTERM, and bounded by
// --timeout only when the flag was given (purge and replay may run longer than the 30 s default).
func commandContext(cmd *cobra.Command, g *globalOptions) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	if !cmd.Flags().Changed("timeout") {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	return ctx, func() { cancel(); stop() }
}
