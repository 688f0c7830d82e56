package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/rmqguard/rmqguard/consumer"
)

// serviceName is the service.name of the example's spans unless OTEL_SERVICE_NAME (or
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const serviceName = "rmqguard-example-consumer"

// tracing is the TracerProvider the consumers report their spans to (nil: no tracing) and how to stop it.
type tracing struct {
	tp *sdktrace.TracerProvider
}

// newTracing exports spans over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, configured by the exporter's OTEL_EXPORTER_OTLP_* variables,
// and as JSON lines to stdout when toStdout (--trace-stdout); both when both. Neither: no provider.
func newTracing(ctx context.Context, toStdout bool, stdout io.Writer) (*tracing, error) {
	var opts []sdktrace.TracerProviderOption
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if toStdout {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(stdout))
		if err != nil {
			return nil, fmt.Errorf("--trace-stdout: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if len(opts) == 0 {
		return &tracing{}, nil
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(serviceName)), resource.WithFromEnv(),
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return &tracing{tp: sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res))...)}, nil
}

// options returns the consumer option that reports to the provider; none without one.
func (t *tracing) options() []consumer.Option {
	if t.tp == nil {
		return nil
	}
	return []consumer.Option{consumer.WithTracerProvider(t.tp)}
}

// shutdown exports the spans still buffered and stops the exporters, within ctx.
func (t *tracing) shutdown(ctx context.Context) error {
	if t.tp == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("trace provider shutdown: %w", err)
	}
	return nil
}
