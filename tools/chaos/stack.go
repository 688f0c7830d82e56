package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// MariaDB controls a dedicated MariaDB server through deploy/local/mariadb-instance.sh, the only way the
// harness touches a database server: never the shared one on 3306.
type MariaDB struct {
	// Repo is the repository root (the script is deploy/local/mariadb-instance.sh under it).
	Repo string
	// Name is the instance name (1..32 of A-Z a-z 0-9 _ -); its state is .local/instances/NAME.
	Name string
}

// Start initialises (on first use) and starts the instance on 127.0.0.1:port and returns its DSN
// (go-sql-driver format, database rmqguard, user rmqguard). A running instance on that port is reused.
// Errors carry the script's output.
func (m *MariaDB) Start(ctx context.Context, port int) (string, error) {
	out, err := m.run(ctx, "start", strconv.Itoa(port))
	return strings.TrimSpace(out), err
}

// DSN returns the DSN of an instance that was started before.
func (m *MariaDB) DSN(ctx context.Context) (string, error) {
	out, err := m.run(ctx, "dsn")
	return strings.TrimSpace(out), err
}

// Stop shuts the server down with SIGTERM and waits until it has exited (SIGKILL after 60 s).
func (m *MariaDB) Stop(ctx context.Context) error { _, err := m.run(ctx, "stop"); return err }

// Restart starts a stopped server again on the port and data it had, and waits until it answers.
func (m *MariaDB) Restart(ctx context.Context) error { _, err := m.run(ctx, "restart"); return err }

// SQL runs statements as root over the instance's socket (root is not subject to read_only).
func (m *MariaDB) SQL(ctx context.Context, sql string) error {
	_, err := m.run(ctx, "sql", sql)
	return err
}

// Remove stops the server and deletes its data.
func (m *MariaDB) Remove(ctx context.Context) error { _, err := m.run(ctx, "remove"); return err }

func (m *MariaDB) run(ctx context.Context, args ...string) (string, error) {
	return script(ctx, m.Repo, "mariadb-instance.sh", append([]string{args[0], m.Name}, args[1:]...)...)
}

// Broker controls a dedicated RocketMQ name server and broker through deploy/local/broker-instance.sh, so
// that a scenario can restart a broker no other test is using.
type Broker struct {
	// Repo is the repository root (the script is deploy/local/broker-instance.sh under it).
	Repo string
	// Name is the instance name; its state is .local/instances/rmq-NAME.
	Name string
}

// Start starts the name server on 127.0.0.1:nsPort and the broker on 127.0.0.1:brokerPort (each reused when
// running) and waits until both listen. The broker also binds brokerPort-2 and brokerPort+1.
func (b *Broker) Start(ctx context.Context, nsPort, brokerPort int) error {
	_, err := b.run(ctx, "start", strconv.Itoa(nsPort), strconv.Itoa(brokerPort))
	return err
}

// RestartBroker stops the broker gracefully (SIGTERM, its offsets and commit log flushed) and starts it
// again on the same port and store; it returns once the broker listens, which is before it has registered
// with the name server.
func (b *Broker) RestartBroker(ctx context.Context) error {
	_, err := b.run(ctx, "restart-broker")
	return err
}

// StopBroker stops the broker gracefully (SIGTERM) and waits until it has exited; the name server stays.
func (b *Broker) StopBroker(ctx context.Context) error {
	_, err := b.run(ctx, "stop-broker")
	return err
}

// StartBroker starts a stopped broker again on the same port and store; it returns once the broker
// listens, which is before it has registered with the name server.
func (b *Broker) StartBroker(ctx context.Context) error {
	_, err := b.run(ctx, "start-broker")
	return err
}

// Stop stops the broker, then the name server.
func (b *Broker) Stop(ctx context.Context) error { _, err := b.run(ctx, "stop"); return err }

func (b *Broker) run(ctx context.Context, args ...string) (string, error) {
	return script(ctx, b.Repo, "broker-instance.sh", append([]string{args[0], b.Name}, args[1:]...)...)
}

// script runs deploy/local/NAME with args and returns its standard output; an error includes both outputs.
func script(ctx context.Context, repo, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "deploy", "local", name), args...)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.String(), nil
}
