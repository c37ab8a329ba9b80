// Package tracing owns the gateway's OpenTelemetry spans and their attributes (the GenAI
// semantic conventions and Gatehouse's own). Per proxied request the gateway makes:
//
//   - a server span "<operation> <model>" (gen_ai.operation.name, gen_ai.provider.name,
//     gen_ai.request.model, gen_ai.response.model, gen_ai.usage.input_tokens,
//     gen_ai.usage.output_tokens, gen_ai.usage.cache_read.input_tokens,
//     gen_ai.usage.cache_creation.input_tokens, gatehouse.client, gatehouse.priority,
//     gatehouse.connection, http.route, http.response.status_code), continuing an incoming
//     W3C traceparent;
//   - a child "gatehouse.admission" per connection choice, covering the queue wait
//     (gatehouse.gate, gatehouse.queue_ms);
//   - a client span per upstream attempt (http.request.method, server.address,
//     server.port, http.response.status_code, gatehouse.connection,
//     gen_ai.request.model), whose context goes upstream in traceparent.
//
// With no tracer (New returns nil for a nil or no-op provider) the gateway only tests for
// nil: no span, no context, no allocation. Everything that allocates for tracing lives in
// this package, behind that test (a traced request costs about 63 allocations and 10 KiB
// more). It never decides anything about a request: the gateway tells it what happened.
//
// # Decisions
//
//   - gen_ai.operation.name is chat for chat completions, the Responses API and Anthropic
//     Messages (http.route tells them apart), text_completion, embeddings, and count_tokens
//     (no GenAI value fits a token count). The span is renamed "<operation> <model>" once
//     the body is read; a request refused before keeps the short name.
//   - Usage comes from the same tap as the budgets; tracing never changes what is sent (no
//     added include_usage, Accept-Encoding not dropped for it), so a stream without usage
//     yields no usage attributes.
//   - The attempt's traceparent replaces any the client sent: the upstream's parent is the
//     attempt. With tracing off the client's own passes as an allowed header. The
//     propagator is fixed to W3C TraceContext, not otel's global, so nothing else in the
//     process can change what goes upstream.
//   - gatehouse.gate comes from the permit (Permit.BlockedBy); a cluster lease does not
//     record it, so in cluster mode it is set only when admission refused.
//   - serve builds the provider (cmd/gatehouse/tracing.go) only when
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set: OTLP/HTTP
//     protobuf behind a batch processor, everything else from the standard OTEL_*
//     variables; it is flushed (at most 5 s) after the HTTP server has drained.
package tracing
