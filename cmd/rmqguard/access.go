package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmqguard/rmqguard/consumer"
	"github.com/rmqguard/rmqguard/internal/rmq"
	"github.com/rmqguard/rmqguard/topics"
)

// Environment variables that provide the ACL and namespace flags' values when the flags are not given. They
// are read when a command runs, never shown as --help defaults (the secret must not appear there).
const (
	envAccessKey = "RMQGUARD_ACCESS_KEY" // ACL access key
	envSecretKey = "RMQGUARD_SECRET_KEY" // ACL secret key
	envNamespace = "RMQGUARD_NAMESPACE"  // RocketMQ namespace
)

// accessFlags are the global --access-key, --secret-key and --namespace flags.
type accessFlags struct {
	accessKey, secretKey, namespace string
}

// register adds the flags to fs with empty defaults.
func (a *accessFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&a.accessKey, "access-key", "", "RocketMQ ACL access key (else $"+envAccessKey+")")
	fs.StringVar(&a.secretKey, "secret-key", "", "RocketMQ ACL secret key (else $"+envSecretKey+"; never printed)")
	fs.StringVar(&a.namespace, "namespace", "", "RocketMQ namespace of groups and topics (else $"+envNamespace+")")
}

// fromEnv fills each flag not given on the command line from its environment variable.
func (a *accessFlags) fromEnv(fs *pflag.FlagSet) {
	for _, f := range []struct {
		name, env string
		dst       *string
	}{{"access-key", envAccessKey, &a.accessKey}, {"secret-key", envSecretKey, &a.secretKey}, {"namespace", envNamespace, &a.namespace}} {
		if fl := fs.Lookup(f.name); fl != nil && !fl.Changed {
			*f.dst = os.Getenv(f.env)
		}
	}
}

// credentials returns the ACL credentials (the zero value without ACL).
func (a *accessFlags) credentials() consumer.Credentials {
	return consumer.Credentials{AccessKey: a.accessKey, SecretKey: a.secretKey}
}

// validate names the flag that is wrong: one key without the other, or an invalid namespace.
func (a *accessFlags) validate() error {
	if (a.accessKey == "") != (a.secretKey == "") {
		return fmt.Errorf("--access-key and --secret-key (or $%s and $%s) go together: give both or neither",
			envAccessKey, envSecretKey)
	}
	if err := rmq.ValidateNamespace(a.namespace); err != nil {
		return fmt.Errorf("--namespace: %w", err)
	}
	return nil
}

// adminOptions returns the rmq options for the flags, or the validation error.
func (o *globalOptions) adminOptions() ([]rmq.Option, error) {
	if err := o.access.validate(); err != nil {
		return nil, err
	}
	return []rmq.Option{rmq.WithCredentials(rmq.Credentials(o.access.credentials())), rmq.WithNamespace(o.access.namespace)}, nil
}

// cluster returns the cluster the global flags describe (name servers, namespace, credentials), validated.
// The dlq commands build their clients from it (dlqtool.ProducerOptions, AdminOptions). Errors name the flag.
func (o *globalOptions) cluster() (topics.Cluster, error) {
	ns, err := o.requireNameServers()
	if err != nil {
		return topics.Cluster{}, err
	}
	if err := o.access.validate(); err != nil {
		return topics.Cluster{}, err
	}
	c := topics.Cluster{NameServers: ns, Namespace: o.access.namespace, Credentials: o.access.credentials()}
	if err := c.Validate(); err != nil {
		return topics.Cluster{}, err
	}
	return c, nil
}

// accessCheckTimeout bounds checkAccess.
const accessCheckTimeout = 10 * time.Second

// checkAccess asks the cluster's master brokers whether they accept c's credentials (when set), so that a
// wrong key fails with "ACL: access denied / signature mismatch for access key …" (exit 1) instead of, say,
// an incomplete DLQ scan whose pulls the broker refused. A check that cannot run (broker unreachable) is
// not held against the command: what follows reports it.
func checkAccess(c topics.Cluster, timeout time.Duration) error {
	if rmq.Credentials(c.Credentials).IsZero() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, accessCheckTimeout))
	defer cancel()
	err := rmq.CheckClusterAccess(ctx, c.NameServers, rmq.Credentials(c.Credentials))
	if rmq.IsACL(err) {
		return failure(err)
	}
	return nil
}
