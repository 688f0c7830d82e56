package chaos_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmqguard/rmqguard/tools/chaos"
)

// TestGate_DownRefusesUpForwardsAgainAndDelayHoldsKeptAliveRequests: through the gate a request reaches
// the target; after Down a connection is refused (the receiver-down fault), after Up the same address
// forwards again, and SetDelay holds a request sent on a kept-alive connection too (the slow receiver).
func TestGate_DownRefusesUpForwardsAgainAndDelayHoldsKeptAliveRequests(t *testing.T) {
	calls := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		_, _ = io.WriteString(w, "ok")
	}))
	defer target.Close()
	g, err := chaos.OpenGate(target.Listener.Addr().String())
	require.NoError(t, err)
	defer g.Close()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func() error {
		resp, err := client.Get("http://" + g.Addr() + "/")
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}

	require.NoError(t, get())
	g.Down()
	client.CloseIdleConnections()
	assert.Error(t, get(), "refused while down")
	require.NoError(t, g.Up(context.Background()))
	require.NoError(t, get())

	g.SetDelay(300 * time.Millisecond) // the previous request's connection is kept alive
	start := time.Now()
	require.NoError(t, get())
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Equal(t, 3, calls)
}
