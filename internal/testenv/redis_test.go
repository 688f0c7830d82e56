package testenv

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fatalTB is a testing.TB whose Fatalf records the message and ends the goroutine, as the real one does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// A port another test's (or another worktree's) redis-server already listens on: StartRedis must not hand
// that server to this test, which would then pause it or believe it stopped.
func TestStartRedis_RefusesAPortItsOwnServerDidNotGet(t *testing.T) {
	first := StartRedis(t, 0)
	port, err := strconv.Atoi(first.Addr[strings.LastIndex(first.Addr, ":")+1:])
	require.NoError(t, err)
	tb := &fatalTB{TB: t}
	done := make(chan *RedisServer)
	go func() {
		var got *RedisServer
		defer func() { done <- got }()
		got = StartRedis(tb, port)
	}()
	second := <-done
	assert.Nil(t, second, "StartRedis returned the other test's server on %d as its own", port)
	assert.Contains(t, tb.msg, "not the redis-server this test started")
}
