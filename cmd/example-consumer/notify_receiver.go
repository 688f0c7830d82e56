package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// idempotencyHeader carries a notification's idempotency key (the outbox effect's, stable across retries).
const idempotencyHeader = "Idempotency-Key"

func newNotifyReceiverCmd(s *settings) *cobra.Command {
	return &cobra.Command{
		Use:   "notify-receiver",
		Short: "receive the paid orders' notifications on --notify-addr (loopback only) until SIGINT/SIGTERM, counting calls per idempotency key",
		Long: `notify-receiver stands for the system a notification goes to: POST /notify with the header
Idempotency-Key is applied the first time a key is seen and only counted after that (as a payment API
dedups by its idempotency key); GET /counts answers {"calls": {key: n}, "applied": {key: n}} for the demo's
verdict. The counts live in memory.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serveReceiver(ctx, s.notifyAddr)
		},
	}
}

// serveReceiver serves a receiver on addr, which must be a loopback address, until ctx ends.
func serveReceiver(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--notify-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--notify-addr %q: the receiver listens on a loopback IP only (127.0.0.1)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("notify receiver: %w", err)
	}
	srv := &http.Server{Handler: newReceiver(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "notify receiver on http://%s/notify\n", addr)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("notify receiver: %w", err)
	}
	return nil
}

// receiverCounts are a receiver's counts per idempotency key: every call, and the calls it applied.
type receiverCounts struct {
	Calls   map[string]int `json:"calls"`
	Applied map[string]int `json:"applied"`
}

// receiver applies a notification once per idempotency key and counts every call.
type receiver struct {
	mu sync.Mutex
	c  receiverCounts
}

func newReceiver() http.Handler {
	r := &receiver{c: receiverCounts{Calls: map[string]int{}, Applied: map[string]int{}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notify", r.notify)
	mux.HandleFunc("GET /counts", r.counts)
	return mux
}

func (r *receiver) notify(w http.ResponseWriter, req *http.Request) {
	key := req.Header.Get(idempotencyHeader)
	if key == "" {
		http.Error(w, idempotencyHeader+" is required", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.c.Calls[key]++
	if r.c.Applied[key] == 0 {
		r.c.Applied[key]++
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) counts(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	b, err := json.Marshal(r.c)
	r.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// fetchReceiverCounts reads the receiver's counts at addr.
func fetchReceiverCounts(ctx context.Context, addr string) (receiverCounts, error) {
	var c receiverCounts
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/counts", nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("notify receiver: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("notify receiver: GET /counts answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return c, fmt.Errorf("notify receiver: counts: %w", err)
	}
	return c, nil
}
