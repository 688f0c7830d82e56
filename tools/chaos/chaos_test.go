package chaos_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
	"github.com/rmqguard/rmqguard/tools/chaos"
)

// TestChaos_F19_F20_ShortForm is the short form of `make chaos` inside `make test`: two example consumer
// processes of one group on the shared broker (no broker restart here) and a MariaDB of the test's own
// (deploy/local/mariadb-instance.sh), 600 messages at 60/s with re-sends, failing-once events and one poison
// message, and in turn: MariaDB restarted mid-run; MariaDB read-only for 6 s (F20); MariaDB stopped for 10 s
// (F19). Each scenario must end with every event taking effect once, one dedup row per event, and the poison
// message alone in %DLQ%<group>; a failure is reported with the scenario's verdict line.
func TestChaos_F19_F20_ShortForm(t *testing.T) {
	rlog.SetLogLevel("fatal")                       // route look-ups of new topics log errors while they appear
	_ = mysql.SetLogger(log.New(io.Discard, "", 0)) // a dropped idle connection after each fault is expected
	ns, broker := testenv.NameServer(t), testenv.Broker(t)
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		testenv.Unavailable(t, "mariadb-install-db (make up installs mariadb-server): %v", err)
	}
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "example-consumer")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/rmqguard/rmqguard/cmd/example-consumer").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	db := &chaos.MariaDB{Repo: repo, Name: testenv.Unique("chaostest")}
	dsn, err := db.Start(ctx, instancePort(t))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Remove(context.Background())) })

	env := chaos.Env{ConsumerBin: bin, NameServers: []string{ns}, BrokerAddr: broker, MariaDB: db, DSN: dsn,
		LogDir: t.TempDir()}
	scenarios, err := chaos.Select(chaos.Scenarios(chaos.Short()), "mariadb-restart,mariadb-readonly,mariadb-stop")
	require.NoError(t, err)
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			env.Out = logWriter{t}
			res := chaos.Run(ctx, env, sc)
			require.Equal(t, 540, res.Events, "600 messages carry 540 distinct events")
			if !res.OK() {
				t.Fatal(res.Line())
			}
			t.Log(res.Line())
		})
	}
}

// instancePort returns a free port in 13401..13499 (13400 is make chaos's) for the test's MariaDB.
func instancePort(t *testing.T) int {
	t.Helper()
	for port := 13401; port < 13500; port++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			require.NoError(t, l.Close())
			return port
		}
	}
	t.Fatal("no free port in 127.0.0.1:13401..13499 for the test's MariaDB")
	return 0
}

// logWriter sends the harness's progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
