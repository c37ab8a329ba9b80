package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// queueResult is what the queueing scenario measured.
type queueResult struct {
	Requests int `json:"requests"`
	// OK, Timeout and Other count answers: 200, 429 SEMAPHORE_TIMEOUT, and
	// everything else (other statuses, transport errors). Other must be 0.
	OK          int      `json:"ok"`
	Timeout     int      `json:"semaphoreTimeout"`
	Other       int      `json:"other"`
	OtherSample []string `json:"otherSample,omitempty"`
	// PeakQueued is the largest number of waiters GET /api/v1/gates showed.
	PeakQueued int     `json:"peakQueued"`
	ElapsedS   float64 `json:"elapsedSeconds"`
	MaxLatency float64 `json:"maxLatencyMs"`
	// RSS before the burst, the peak during it (the larger of 20 ms samples of
	// VmRSS and VmHWM after a clear_refs reset) and the growth.
	RSSBeforeMB float64 `json:"rssBeforeMB"`
	RSSPeakMB   float64 `json:"rssPeakMB"`
	RSSGrowthMB float64 `json:"rssGrowthMB"`
	// GatehouseCPUPerReqUs is Gatehouse's CPU for the whole burst ÷ requests.
	GatehouseCPUPerReqUs float64 `json:"gatehouseCpuPerRequestUs"`
	// AtPeak is Gatehouse's own view (/metrics, Go collector) in the sample
	// with the most goroutines: where the memory of the waiters goes.
	AtPeak runtimeView `json:"runtimeAtPeak"`
	// HeapProfile says where the heap profile taken with 80% queued went.
	HeapProfile string `json:"heapProfile,omitempty"`
	// HeapTop is the top of that profile (inuse_space).
	HeapTop []string `json:"heapTop,omitempty"`
}

// runtimeView is a few Go runtime gauges scraped from /metrics, MB and counts.
type runtimeView struct {
	Goroutines  float64 `json:"goroutines"`
	HeapAllocMB float64 `json:"heapAllocMB"`
	HeapInuseMB float64 `json:"heapInuseMB"`
	StackMB     float64 `json:"stackInuseMB"`
	NextGCMB    float64 `json:"nextGcMB"`
}

// queueBurst sends n concurrent requests at once against the cap-1 gate and
// classifies every answer while sampling Gatehouse's RSS and queue depth. When
// at least 80% of the requests are queued it calls atPeak once (if not nil), to
// take a heap profile of the waiters; what it returns goes in HeapProfile.
func queueBurst(ctx context.Context, t target, n int, timeout time.Duration, pid int, gates func(context.Context) (int, error), runtime func(context.Context) (runtimeView, error), atPeakFn func(context.Context) string) (queueResult, error) {
	res := queueResult{Requests: n}
	before, err := readMem(pid)
	if err != nil {
		return res, err
	}
	hwmReset := resetPeakRSS(pid) == nil
	cpu0, err := processCPU(pid)
	if err != nil {
		return res, err
	}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	var (
		sampled sync.WaitGroup
		peakRSS = before.RSS
		peakQ   int
		atPeak  runtimeView
	)
	sampled.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if m, err := readMem(pid); err == nil {
				peakRSS = max(peakRSS, m.RSS)
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	})
	sampled.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			if q, err := gates(sampleCtx); err == nil {
				peakQ = max(peakQ, q)
				if atPeakFn != nil && q >= n*8/10 {
					res.HeapProfile = atPeakFn(sampleCtx)
					atPeakFn = nil
				}
			}
			if v, err := runtime(sampleCtx); err == nil && v.Goroutines > atPeak.Goroutines {
				atPeak = v
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-tick.C:
			}
		}
	})

	client, tr := newClient(n, timeout)
	defer tr.CloseIdleConnections()
	atk := vegeta.NewAttacker(
		vegeta.Client(cancelOn(ctx, client)),
		vegeta.Workers(uint64(n)),
		vegeta.MaxWorkers(uint64(n)),
		vegeta.MaxBody(4096),
	)
	stop := context.AfterFunc(ctx, func() { atk.Stop() })
	defer stop()

	start := time.Now()
	var maxLat time.Duration
	seen := map[string]bool{}
	for r := range atk.Attack(vegeta.NewStaticTargeter(t.vegetaTarget()), countPacer{n: uint64(n)}, 0, "") {
		maxLat = max(maxLat, r.Latency)
		switch {
		case r.Code == http.StatusOK:
			res.OK++
		case r.Code == http.StatusTooManyRequests && bytes.Contains(r.Body, []byte(`"SEMAPHORE_TIMEOUT"`)):
			res.Timeout++
		default:
			res.Other++
			what := strconv.Itoa(int(r.Code)) + " " + r.Error
			if r.Code != 0 {
				what += " " + string(bytes.TrimSpace(r.Body))
			}
			if !seen[what] && len(seen) < 5 {
				seen[what] = true
				res.OtherSample = append(res.OtherSample, what)
			}
		}
	}
	elapsed := time.Since(start)
	stopSampling()
	sampled.Wait()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("bench: queue burst: %w", err)
	}
	cpu1, err := processCPU(pid)
	if err != nil {
		return res, err
	}
	if hwmReset {
		if m, err := readMem(pid); err == nil {
			peakRSS = max(peakRSS, m.HWM)
		}
	}
	res.PeakQueued = peakQ
	res.AtPeak = atPeak
	res.ElapsedS = elapsed.Seconds()
	res.MaxLatency = float64(maxLat) / float64(time.Millisecond)
	res.RSSBeforeMB = megabytes(before.RSS)
	res.RSSPeakMB = megabytes(peakRSS)
	res.RSSGrowthMB = megabytes(peakRSS - before.RSS)
	res.GatehouseCPUPerReqUs = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(n)
	return res, nil
}

// gatesQueued returns the total number of waiters across every gate (a
// waiter is parked on exactly one gate) from GET /api/v1/gates.
func gatesQueued(ctx context.Context, client *http.Client, gatehouseURL, apiToken string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gatehouseURL+"/api/v1/gates", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("bench: GET /api/v1/gates: %s", resp.Status)
	}
	var doc struct {
		Gates []struct {
			Queued int `json:"queued"`
		} `json:"gates"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return 0, fmt.Errorf("bench: decode gates: %w", err)
	}
	total := 0
	for _, g := range doc.Gates {
		total += g.Queued
	}
	return total, nil
}

// scrapeRuntime reads Go runtime gauges from Gatehouse's /metrics (an API token is
// needed on the main listener).
func scrapeRuntime(ctx context.Context, client *http.Client, gatehouseURL, apiToken string) (runtimeView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gatehouseURL+"/metrics", nil)
	if err != nil {
		return runtimeView{}, err
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := client.Do(req)
	if err != nil {
		return runtimeView{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return runtimeView{}, fmt.Errorf("bench: GET /metrics: %s", resp.Status)
	}
	var v runtimeView
	fields := map[string]*float64{
		"go_goroutines":                 &v.Goroutines,
		"go_memstats_heap_alloc_bytes":  &v.HeapAllocMB,
		"go_memstats_heap_inuse_bytes":  &v.HeapInuseMB,
		"go_memstats_stack_inuse_bytes": &v.StackMB,
		"go_memstats_next_gc_bytes":     &v.NextGCMB,
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if dst := fields[name]; ok && dst != nil {
			x, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
			if err == nil {
				*dst = x
			}
		}
	}
	if err := sc.Err(); err != nil {
		return runtimeView{}, fmt.Errorf("bench: read /metrics: %w", err)
	}
	for _, p := range []*float64{&v.HeapAllocMB, &v.HeapInuseMB, &v.StackMB, &v.NextGCMB} {
		*p /= 1e6
	}
	return v, nil
}
