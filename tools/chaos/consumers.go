package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// ConsumerArgs are the settings every example consumer process of a scenario runs with.
type ConsumerArgs struct {
	// Bin is the built cmd/example-consumer.
	Bin string
	// NameServers, Broker, DSN, Group and Topic are passed as --namesrv, --broker, --mysql-dsn, --group, --topic.
	NameServers, Broker, DSN, Group, Topic string
	// LoyaltyTopic and NotifyAddr, when set, are passed as --loyalty-topic and --notify-addr (the paid
	// orders' outbox follow-ups).
	LoyaltyTopic, NotifyAddr string
	// LogDir receives consumer-<slot>.log (appended to across restarts).
	LogDir string
}

// Consumers is a fixed number of example consumer processes ("slots") of one consumer group. A slot's
// process can be killed and started again; every start is a new generation with its own /metrics.
type Consumers struct {
	args ConsumerArgs
	mu   sync.Mutex
	proc []*process // by slot; nil before the first start
}

// process is one running (or exited) example consumer.
type process struct {
	cmd     *exec.Cmd
	gen     int
	addr    string        // host:port of /metrics and /healthz
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, valid after done
	stopped bool          // we killed or stopped it
}

// Target is where to scrape one generation of one slot.
type Target struct {
	// Key names the slot and generation ("1/0": slot 1, first start).
	Key string
	// Slot is the consumer slot, 0-based.
	Slot int
	// MetricsURL is http://addr/metrics.
	MetricsURL string
}

// NewConsumers returns n slots, none started.
func NewConsumers(args ConsumerArgs, n int) *Consumers {
	return &Consumers{args: args, proc: make([]*process, n)}
}

// Start starts the slot's process (a new generation) and waits up to 60 s until its /healthz answers 200.
// Errors: the slot is running, the process cannot start, exits during start-up, or never becomes healthy
// (the process is then killed); each names the slot's log.
func (c *Consumers) Start(ctx context.Context, slot int) error {
	c.mu.Lock()
	prev := c.proc[slot]
	c.mu.Unlock()
	if prev != nil && !prev.exited() {
		return fmt.Errorf("consumer %d is running", slot)
	}
	gen := 0
	if prev != nil {
		gen = prev.gen + 1
	}
	p, err := c.spawn(slot, gen)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proc[slot] = p
	c.mu.Unlock()
	if err := p.waitHealthy(ctx, 60*time.Second); err != nil {
		_ = c.Kill(slot)
		return fmt.Errorf("consumer %d: %w (log: %s)", slot, err, c.logPath(slot))
	}
	return nil
}

func (c *Consumers) logPath(slot int) string {
	return filepath.Join(c.args.LogDir, fmt.Sprintf("consumer-%d.log", slot))
}

// spawn starts the process of slot with a free metrics port; its waiter goroutine ends when it exits.
func (c *Consumers) spawn(slot, gen int) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(c.logPath(slot), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("consumer %d log: %w", slot, err)
	}
	a := c.args
	cmd := exec.Command(a.Bin, "run", "--namesrv", a.NameServers, "--broker", a.Broker, "--mysql-dsn", a.DSN,
		"--group", a.Group, "--topic", a.Topic, "--metrics-addr", addr)
	if a.LoyaltyTopic != "" {
		cmd.Args = append(cmd.Args, "--loyalty-topic", a.LoyaltyTopic)
	}
	if a.NotifyAddr != "" {
		cmd.Args = append(cmd.Args, "--notify-addr", a.NotifyAddr)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Killed with the harness, even when the harness itself is killed: no consumer outlives a run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("consumer %d: start %s: %w", slot, a.Bin, err)
	}
	p := &process{cmd: cmd, gen: gen, addr: addr, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Kill sends SIGKILL to the slot's process and waits until it has exited.
func (c *Consumers) Kill(slot int) error {
	return c.signal(slot, syscall.SIGKILL, 10*time.Second)
}

// Stop sends SIGTERM to every running process (a graceful shutdown: in-flight messages drain), waits up to
// 40 s each, then SIGKILLs what is left. It returns the processes that exited on their own before (a crash
// the scenario must report) or did not stop in time.
func (c *Consumers) Stop() error {
	var errs []error
	for slot := range c.proc {
		errs = append(errs, c.Unexpected(slot))
		if err := c.signal(slot, syscall.SIGTERM, 40*time.Second); err != nil {
			errs = append(errs, err)
			_ = c.Kill(slot)
		}
	}
	return errors.Join(errs...)
}

// Freeze stops (SIGSTOP) every running process, so that none of them acts until Thaw; Thaw continues
// them (SIGCONT). Errors name the slot.
func (c *Consumers) Freeze() error { return c.all(syscall.SIGSTOP) }

// Thaw continues the processes Freeze stopped.
func (c *Consumers) Thaw() error { return c.all(syscall.SIGCONT) }

func (c *Consumers) all(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for slot, p := range c.proc {
		if p != nil && !p.exited() {
			if err := p.cmd.Process.Signal(sig); err != nil {
				errs = append(errs, fmt.Errorf("consumer %d: %s: %w", slot, sig, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Unexpected returns an error when the slot's current process exited without being killed or stopped.
func (c *Consumers) Unexpected(slot int) error {
	c.mu.Lock()
	p := c.proc[slot]
	c.mu.Unlock()
	if p == nil || p.stopped || !p.exited() {
		return nil
	}
	return fmt.Errorf("consumer %d exited on its own: %v (log: %s)", slot, p.err, c.logPath(slot))
}

func (c *Consumers) signal(slot int, sig syscall.Signal, wait time.Duration) error {
	c.mu.Lock()
	p := c.proc[slot]
	if p != nil {
		p.stopped = true
	}
	c.mu.Unlock()
	if p == nil || p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("consumer %d still running %s after %s", slot, sig, wait)
	}
}

// Targets returns the /metrics of every slot's current process.
func (c *Consumers) Targets() []Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Target
	for slot, p := range c.proc {
		if p != nil && !p.exited() {
			out = append(out, Target{Key: fmt.Sprintf("%d/%d", slot, p.gen), Slot: slot, MetricsURL: "http://" + p.addr + "/metrics"})
		}
	}
	return out
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitHealthy polls /healthz every 200 ms until it answers 200, the process exits, or timeout passes.
func (p *process) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if status(ctx, "http://"+p.addr+"/healthz") == http.StatusOK {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited during start-up: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %s: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// status is the HTTP status of GET url, 0 when there is no answer.
func status(ctx context.Context, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// freeAddr returns a 127.0.0.1 address whose port nobody listens on right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
