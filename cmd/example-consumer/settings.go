package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
)

// settings are the connection settings shared by the subcommands.
type settings struct {
	nameServers string
	broker      string
	mysqlDSN    string
	group       string
	topic       string
	metricsAddr string
	// loyaltyTopic carries the LoyaltyPointsCredited events the OrderPaid handler sends through the outbox;
	// the group <group>-loyalty consumes it. notifyAddr is the notification receiver (notify-receiver).
	loyaltyTopic, notifyAddr string
	// accessKey, secretKey and namespace are the flags' values; clusterAccess adds the environment.
	accessKey, secretKey, namespace string
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
	f.StringVar(&s.broker, "broker", os.Getenv("RMQGUARD_BROKER_ADDR"), "master broker that is to hold the business topic, host:port (env RMQGUARD_BROKER_ADDR; empty: every master)")
	f.StringVar(&s.mysqlDSN, "mysql-dsn", os.Getenv("RMQGUARD_MYSQL_DSN"), "MySQL/MariaDB DSN (env RMQGUARD_MYSQL_DSN; required)")
	f.StringVar(&s.group, "group", env("RMQGUARD_DEMO_GROUP", "rmqguard-demo"), "consumer group (env RMQGUARD_DEMO_GROUP)")
	f.StringVar(&s.topic, "topic", env("RMQGUARD_DEMO_TOPIC", "RMQGUARD_DEMO_ORDER"), "topic of OrderCreated events (env RMQGUARD_DEMO_TOPIC)")
	f.StringVar(&s.loyaltyTopic, "loyalty-topic", env("RMQGUARD_DEMO_LOYALTY_TOPIC", "RMQGUARD_DEMO_LOYALTY"),
		"topic of the LoyaltyPointsCredited events sent through the outbox, consumed by group <group>-loyalty (env RMQGUARD_DEMO_LOYALTY_TOPIC)")
	f.StringVar(&s.notifyAddr, "notify-addr", env("RMQGUARD_NOTIFY_ADDR", "127.0.0.1:9477"),
		"host:port of the notification receiver (notify-receiver) the paid orders' notification effect calls (env RMQGUARD_NOTIFY_ADDR)")
	f.StringVar(&s.metricsAddr, "metrics-addr", env("RMQGUARD_METRICS_ADDR", "127.0.0.1:9464"), "address of /metrics and /healthz (env RMQGUARD_METRICS_ADDR)")
	// No defaults shown: the environment is read when the command runs, so --help never prints a secret.
	f.StringVar(&s.accessKey, "access-key", "", "RocketMQ ACL access key (else env RMQGUARD_ACCESS_KEY)")
	f.StringVar(&s.secretKey, "secret-key", "", "RocketMQ ACL secret key (else env RMQGUARD_SECRET_KEY; never printed)")
	f.StringVar(&s.namespace, "namespace", "", "RocketMQ namespace of the group and topic (else env RMQGUARD_NAMESPACE)")
}

// clusterAccess returns the ACL credentials and namespace: each flag, else its environment variable.
// Errors name the flag: one key without the other, or an invalid namespace.
func (s *settings) clusterAccess() (consumer.Credentials, string, error) {
	c := consumer.Credentials{AccessKey: orEnv(s.accessKey, "RMQGUARD_ACCESS_KEY"), SecretKey: orEnv(s.secretKey, "RMQGUARD_SECRET_KEY")}
	ns := orEnv(s.namespace, "RMQGUARD_NAMESPACE")
	if (c.AccessKey == "") != (c.SecretKey == "") {
		return consumer.Credentials{}, "", errors.New("--access-key and --secret-key (or RMQGUARD_ACCESS_KEY and RMQGUARD_SECRET_KEY) go together: give both or neither")
	}
	if err := rmq.ValidateNamespace(ns); err != nil {
		return consumer.Credentials{}, "", fmt.Errorf("--namespace: %w", err)
	}
	return c, ns, nil
}

// orEnv returns v, or the environment variable name when v is empty.
func orEnv(v, name string) string {
	if v != "" {
		return v
	}
	return strings.TrimSpace(os.Getenv(name))
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
		Short:         "rmqguard example: order, payment and cancellation events → orders, stock and account balances, each effect once",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	s.bind(root)
	root.AddCommand(newRunCmd(s), newDemoCmd(s), newReconcileCmd(s), newNotifyReceiverCmd(s))
	return root
}

// loyaltyGroup is the consumer group of the loyalty topic.
func (s *settings) loyaltyGroup() string { return s.group + "-loyalty" }
