// Command mockupstream serves the fake OpenAI/Anthropic/Gemini provider of
// gateway/upstreamtest on a TCP address, for end-to-end tests, load tests
// and demos. It prints the OpenAI base URL and stops gracefully on SIGINT or
// SIGTERM.
//
// Usage:
//
//	mockupstream [-addr 127.0.0.1:9090] [-latency 0s] [-chunks 8]
//	             [-chunk-interval 0s] [-usage-tokens 30] [-models a,b]
//
// Every flag can also be set in the environment: MOCKUPSTREAM_ADDR,
// MOCKUPSTREAM_LATENCY, MOCKUPSTREAM_CHUNKS, MOCKUPSTREAM_CHUNK_INTERVAL,
// MOCKUPSTREAM_USAGE_TOKENS, MOCKUPSTREAM_MODELS; flags win.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
