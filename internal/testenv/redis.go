package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmqguard/rmqguard/dedup/redisfast"
)

// DefaultRedisAddr is the shared Redis of `make up` (RMQGUARD_REDIS_ADDR).
const DefaultRedisAddr = "127.0.0.1:6379"

// redisOptions are the client options of the tests, the fast path's own (redisfast.ClientOptions): commands
// bounded by the context's deadline, short network timeouts, no retries and one dial attempt.
func redisOptions(addr string) *redis.Options { return redisfast.ClientOptions(addr) }

// Redis returns a client of the shared Redis (RMQGUARD_REDIS_ADDR) after a PING, closed when the test
// ends. Tests on it must use keys of their own (a Unique prefix) and never flush it.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	addr := Env("RMQGUARD_REDIS_ADDR", DefaultRedisAddr)
	rdb := redis.NewClient(redisOptions(addr))
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		Unavailable(t, "Redis at RMQGUARD_REDIS_ADDR=%s: %v", addr, err)
	}
	return rdb
}

// RedisServer is a redis-server process of one test (never the shared one), which the test may stop.
type RedisServer struct {
	// Addr is "127.0.0.1:port".
	Addr string
	t    testing.TB
	cmd  *exec.Cmd
	once sync.Once
}

// StartRedis starts `redis-server --port port --save ”` (no persistence) on 127.0.0.1, waits until it
// answers PING (at most 5 s) and stops it when the test ends. It fails the test (or skips it, see
// Unavailable) when redis-server is not installed.
func StartRedis(t testing.TB, port int) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server: %v", err)
		return nil
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server on %d: %v", port, err)
	}
	s := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), t: t, cmd: cmd}
	t.Cleanup(s.Stop)
	rdb := s.Client()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %d did not answer PING within 5 s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a new client of the server (see Redis for its options), closed when the test ends.
func (s *RedisServer) Client() *redis.Client {
	rdb := redis.NewClient(redisOptions(s.Addr))
	s.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Stop kills the server (SIGKILL to the process this test started: Redis dies as in a crash) and waits for it; later calls do
// nothing.
func (s *RedisServer) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}
