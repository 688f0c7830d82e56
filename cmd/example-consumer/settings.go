package main

import (
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// settings are the connection settings shared by the subcommands.
type settings struct {
	nameServers string
	broker      string
	mysqlDSN    string
	group       string
	topic       string
	metricsAddr string
}

func env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

func (s *settings) bind(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&s.nameServers, "namesrv", os.Getenv("RMQGUARD_NAMESRV"), "name server addresses, comma-separated (env RMQGUARD_NAMESRV; required)")
	f.StringVar(&s.broker, "broker", env("RMQGUARD_BROKER_ADDR", "127.0.0.1:10911"), "broker address for creating topics (env RMQGUARD_BROKER_ADDR)")
	f.StringVar(&s.mysqlDSN, "mysql-dsn", os.Getenv("RMQGUARD_MYSQL_DSN"), "MySQL/MariaDB DSN (env RMQGUARD_MYSQL_DSN; required)")
	f.StringVar(&s.group, "group", env("RMQGUARD_DEMO_GROUP", "rmqguard-demo"), "consumer group (env RMQGUARD_DEMO_GROUP)")
	f.StringVar(&s.topic, "topic", env("RMQGUARD_DEMO_TOPIC", "RMQGUARD_DEMO_ORDER"), "topic of OrderCreated events (env RMQGUARD_DEMO_TOPIC)")
	f.StringVar(&s.metricsAddr, "metrics-addr", env("RMQGUARD_METRICS_ADDR", "127.0.0.1:9464"), "address of /metrics and /healthz (env RMQGUARD_METRICS_ADDR)")
}

func (s *settings) nameServerList() []string {
	var out []string
	for _, ns := range strings.Split(s.nameServers, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

func newRootCmd() *cobra.Command {
	s := &settings{}
	root := &cobra.Command{
		Use:           "example-consumer",
		Short:         "rmqguard example: OrderCreated events → orders and inventory reservations, each effect once",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	s.bind(root)
	root.AddCommand(newRunCmd(s), newDemoCmd(s))
	return root
}
