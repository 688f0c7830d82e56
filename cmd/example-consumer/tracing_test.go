package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without OTEL_EXPORTER_OTLP_ENDPOINT and --trace-stdout there is no provider: the consumers get no
// option and start no spans.
func TestTracing_NoEndpointNoFlagNoProvider(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := newTracing(context.Background(), false, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Empty(t, tr.options())
	assert.NoError(t, tr.shutdown(context.Background()))
}

// --trace-stdout writes the spans to stdout, with the service name, when the provider shuts down; with
// OTEL_EXPORTER_OTLP_ENDPOINT set they are also posted to <endpoint>/v1/traces (OTLP/HTTP).
func TestTracing_StdoutFlagAndOTLPEndpointExportTheSpans(t *testing.T) {
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "")
	var stdout bytes.Buffer
	tr, err := newTracing(context.Background(), true, &stdout)
	require.NoError(t, err)
	require.Len(t, tr.options(), 1)

	_, span := tr.tp.Tracer("test").Start(context.Background(), "process ORDER")
	span.End()
	require.NoError(t, tr.shutdown(context.Background()))

	assert.Contains(t, stdout.String(), `"Name":"process ORDER"`)
	assert.Contains(t, stdout.String(), serviceName)
	assert.Equal(t, int32(1), posts.Load(), "one export to the collector")
}
