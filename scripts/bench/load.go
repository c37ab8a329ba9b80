package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// target is one kind of request: where it goes and what it carries.
type target struct {
	url    string
	header http.Header
	body   []byte
}

// vegetaTarget returns the vegeta form of t.
func (t target) vegetaTarget() vegeta.Target {
	return vegeta.Target{Method: http.MethodPost, URL: t.url, Body: t.body, Header: t.header}
}

// newTarget returns a chat completion target at base (an OpenAI base URL).
func newTarget(base, bearer, model string, stream bool, extra http.Header) target {
	h := http.Header{
		"Authorization": {"Bearer " + bearer},
		"Content-Type":  {"application/json"},
	}
	for k, v := range extra {
		h[k] = v
	}
	return target{url: base + "/chat/completions", header: h, body: chatBody(model, stream)}
}

// newClient returns the harness's own HTTP client for conc concurrent
// requests: HTTP/1.1 keep-alive with an idle pool as large as the
// concurrency (Go's default of 2 idle connections per host would make most
// requests dial), no compression, and the given overall timeout.
func newClient(conc int, timeout time.Duration) (*http.Client, *http.Transport) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conc + 16,
		MaxIdleConnsPerHost: conc + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: timeout}, tr
}

// cancelOn wraps a client so that every request it sends carries ctx: vegeta
// builds requests without a context, and Stop alone would let requests that
// are already queued in Gatehouse run to their end.
func cancelOn(ctx context.Context, c *http.Client) *http.Client {
	next := c.Transport
	c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return next.RoundTrip(r.WithContext(ctx))
	})
	return c
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// loadResult is what one closed-loop attack measured.
type loadResult struct {
	metrics vegeta.Metrics
	// elapsed is the attack's wall time, first request to last answer.
	elapsed time.Duration
	// cpu is the CPU time each watched process spent during the attack.
	cpu map[string]time.Duration
}

// cpuProbe reads one process's CPU time.
type cpuProbe struct {
	name string
	read func() time.Duration
}

// closedLoop runs conc workers that each send t back to back for d (max-rate
// closed loop: vegeta's zero Rate with Workers = MaxWorkers = conc) and
// returns the metrics and the CPU every probe spent. Response bodies are read
// to the end and discarded. It stops early when ctx ends.
func closedLoop(ctx context.Context, t target, conc int, d time.Duration, probes []cpuProbe) loadResult {
	client, tr := newClient(conc, 60*time.Second)
	defer tr.CloseIdleConnections()
	atk := vegeta.NewAttacker(
		vegeta.Client(cancelOn(ctx, client)),
		vegeta.Workers(uint64(conc)),
		vegeta.MaxWorkers(uint64(conc)),
		vegeta.MaxBody(0),
	)
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	before := readProbes(probes)
	start := time.Now()
	var res loadResult
	for r := range atk.Attack(vegeta.NewStaticTargeter(t.vegetaTarget()), vegeta.Rate{}, d, "") {
		res.metrics.Add(r)
	}
	res.elapsed = time.Since(start)
	after := readProbes(probes)
	res.metrics.Close()
	res.cpu = make(map[string]time.Duration, len(probes))
	for name, v := range after {
		res.cpu[name] = v - before[name]
	}
	return res
}

// countPacer lets exactly n requests go, all at once, then stops the attack.
type countPacer struct{ n uint64 }

// Pace implements vegeta.Pacer.
func (p countPacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) {
	return 0, hits >= p.n
}

// Rate implements vegeta.Pacer; the rate is unbounded.
func (p countPacer) Rate(time.Duration) float64 { return 0 }

func readProbes(probes []cpuProbe) map[string]time.Duration {
	m := make(map[string]time.Duration, len(probes))
	for _, p := range probes {
		m[p.name] = p.read()
	}
	return m
}

// selfCPU returns the harness's own CPU time.
func selfCPU() time.Duration {
	d, err := processCPU(os.Getpid())
	if err != nil {
		return 0
	}
	return d
}
