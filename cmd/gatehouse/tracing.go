package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tracingEnabled reports whether the standard OTEL_* variables ask for traces: an
// OTLP endpoint (for all signals or for traces) set, and the SDK not disabled.
func tracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing returns the tracer provider for the gateway and the function that
// flushes and stops it, or a nil provider (tracing off: no exporter, no spans) when
// no OTLP endpoint is configured. The exporter speaks OTLP/HTTP protobuf; it and the
// SDK read the other standard variables themselves (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION, OTEL_TRACES_SAMPLER and _ARG, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_SERVICE_NAME, which replaces the default service name "gatehouse").
func startTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if !tracingEnabled(getenv) {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// Later sources win: the default name, then OTEL_RESOURCE_ATTRIBUTES and
	// OTEL_SERVICE_NAME.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "gatehouse")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	// Export failures (collector away) come through otel's error handler: logged,
	// never on the request path.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing", slog.Any("error", err))
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("tracing to OTLP/HTTP", slog.String("service", serviceName(res)))
	return tp, tp.Shutdown, nil
}

func serviceName(res *resource.Resource) string {
	v, _ := res.Set().Value("service.name")
	return v.AsString()
}
