package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/internal/testenv"
)

// javaSend is one message the Java producer (interop/java-producer) sent with SEND_OK: its case (normal,
// batch, transactional, non-ascii, extra-field, zlib, lz4, zstd), the event's EVENT_ID and the message ID.
type javaSend struct {
	kase, eventID, msgID string
}

// javaProducerClassPath builds the Java producer when it is missing or stale (scripts/interop-java.sh, the
// script of `make interop-java`) and returns its class path. Without java or mvn the test is skipped, or
// fails under RMQGUARD_REQUIRE_SERVICES=1.
func javaProducerClassPath(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "%s not found: the Java interop test builds and runs the official Java client", tool)
		}
	}
	root, err := filepath.Abs("..") // go test runs in the package's directory, e2e/
	require.NoError(t, err)
	out, err := exec.Command(filepath.Join(root, "scripts", "interop-java.sh")).CombinedOutput()
	require.NoError(t, err, "scripts/interop-java.sh: %s", out)
	target := filepath.Join(root, "interop", "java-producer", "target")
	return filepath.Join(target, "java-producer.jar") + string(filepath.ListSeparator) + filepath.Join(target, "lib", "*")
}

// runJavaProducer runs the Java producer on the world's topic with the world's run as prefix of every event
// ID and order number, each event sent copies times, and returns what it reports as sent. It fails the
// test unless the producer exits 0 after its DONE line with the count of its SENT lines.
func (w *world) runJavaProducer(classPath string, copies int) []javaSend {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java",
		"-Dnamesrv="+w.ns[0], "-Dtopic="+w.topic, "-Drun="+w.run, "-Dcopies="+strconv.Itoa(copies),
		// The client's own log goes to the test's temporary folder, not ~/logs.
		"-Drocketmq.log.root="+w.t.TempDir(), "-Drocketmq.log.level=warn",
		"-cp", classPath, "io.github.rmqguard.interop.InteropProducer")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(w.t, cmd.Run(), "java producer: %s%s", stdout.String(), stderr.String())

	var sent []javaSend
	done := ""
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		f := strings.Split(line, "\t")
		switch {
		case len(f) == 4 && f[0] == "SENT":
			sent = append(sent, javaSend{kase: f[1], eventID: f[2], msgID: f[3]})
		case len(f) == 2 && f[0] == "DONE":
			done = f[1]
		default:
			w.t.Fatalf("java producer: unexpected output line %q", line)
		}
	}
	require.Equal(w.t, strconv.Itoa(len(sent)), done, "the DONE line counts the SENT lines")
	return sent
}
