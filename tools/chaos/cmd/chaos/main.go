// Command chaos runs the chaos scenarios of `make chaos` (scripts/chaos.sh) against a stack that was started
// for it: a dedicated MariaDB (deploy/local/mariadb-instance.sh) and a dedicated name server and broker
// (deploy/local/broker-instance.sh). It never starts or stops that stack itself; the script does.
//
//	chaos --consumer-bin BIN --mariadb-instance NAME --broker-instance NAME --namesrv ADDR --broker ADDR \
//	      [--scenarios all|NAME,...] [--short] [--log-dir DIR]
//
// Each scenario ends with one line, "chaos: ok …" or "chaos: FAILED …"; a failing scenario does not stop
// the others. Exit status 1 when any scenario failed, 2 on invalid flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/rmqguard/rmqguard/tools/chaos"
)

type options struct {
	consumerBin, mariadbInstance, brokerInstance, nameServers, broker, scenarios, logDir, repo string
	short                                                                                      bool
}

// errFailed marks the exit of a run where some scenario failed (its line has been printed).
var errFailed = errors.New("some scenarios failed")

func main() {
	o := options{}
	cmd := &cobra.Command{
		Use:           "chaos",
		Short:         "apply faults to two example consumers of one group under load and verify every event took effect once",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.consumerBin, "consumer-bin", "", "built cmd/example-consumer (required)")
	f.StringVar(&o.mariadbInstance, "mariadb-instance", "chaos", "name of the running deploy/local/mariadb-instance.sh instance")
	f.StringVar(&o.brokerInstance, "broker-instance", "chaos", "name of the running deploy/local/broker-instance.sh instance; empty: a shared broker (no broker-restart)")
	f.StringVar(&o.nameServers, "namesrv", "127.0.0.1:19876", "name server of the broker instance, comma-separated")
	f.StringVar(&o.broker, "broker", "127.0.0.1:20911", "broker address of the broker instance")
	f.StringVar(&o.scenarios, "scenarios", "all", "comma-separated scenario names, or all")
	f.BoolVar(&o.short, "short", false, "the short profile of make test (600 messages, shorter faults) instead of the full one")
	f.StringVar(&o.logDir, "log-dir", ".local/chaos", "where each scenario's consumer logs go")
	f.StringVar(&o.repo, "repo", ".", "repository root (its deploy/local scripts control the stack)")
	if err := cmd.Execute(); err != nil {
		if !errors.Is(err, errFailed) {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	rlog.SetLogLevel("fatal") // the client's own chatter would bury the report
	// The driver logs a dropped idle connection after every database fault; the verdicts say what counts.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	if o.consumerBin == "" {
		return errors.New("--consumer-bin: required (go build -o BIN ./cmd/example-consumer)")
	}
	profile := chaos.Full()
	if o.short {
		profile = chaos.Short()
	}
	scenarios, err := chaos.Select(chaos.Scenarios(profile), o.scenarios)
	if err != nil {
		return fmt.Errorf("--scenarios: %w", err)
	}
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		return fmt.Errorf("--repo: %w", err)
	}
	env := chaos.Env{ConsumerBin: o.consumerBin, NameServers: strings.Split(o.nameServers, ","), BrokerAddr: o.broker,
		MariaDB: &chaos.MariaDB{Repo: repo, Name: o.mariadbInstance}, LogDir: o.logDir, Out: os.Stdout}
	if o.brokerInstance != "" {
		env.Broker = &chaos.Broker{Repo: repo, Name: o.brokerInstance}
	}
	if env.DSN, err = env.MariaDB.DSN(ctx); err != nil {
		return fmt.Errorf("--mariadb-instance: %w", err)
	}
	failed := 0
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			break
		}
		fmt.Printf("chaos: scenario %s\n", sc.Name)
		res := chaos.Run(ctx, env, sc)
		fmt.Println(res.Line())
		if !res.OK() {
			failed++
		}
	}
	fmt.Printf("chaos: %d of %d scenarios passed\n", len(scenarios)-failed, len(scenarios))
	if failed > 0 || ctx.Err() != nil {
		return errFailed
	}
	return nil
}
