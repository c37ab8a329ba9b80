package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Paths a request can take.
const (
	pathDirect    = "direct"
	pathGatehouse = "gatehouse"
)

// scenario is one standard load shape, run on both paths.
type scenario struct {
	name     string
	conc     int
	stream   bool
	minRatio float64 // target: through/direct req/s at least this (0 = none)
	maxCPUUs float64 // target: Gatehouse CPU per request at most this (0 = none)
	// minCluster: target cluster ÷ single req/s (0 = no cluster-mode run).
	minCluster float64
	// minLogRatio: target request log on ÷ off req/s (0 = no log-off run).
	minLogRatio float64
}

// standardScenarios returns the runs of DESIGN.md's "Cost" table, with the
// end-to-end targets (docs/BENCHMARKS.md). The second one is the profiled shape.
func standardScenarios() []scenario {
	return []scenario{
		{name: "non-streaming c=1", conc: 1},
		{name: "non-streaming c=16", conc: 16, minRatio: 0.45, maxCPUUs: 45, minCluster: 0.7, minLogRatio: 0.9},
		{name: "non-streaming c=64", conc: 64},
		{name: "streaming c=16 (20 chunks)", conc: 16, stream: true, minRatio: 0.75, minCluster: 0.8},
	}
}

// Memory targets, MB (10^6 bytes).
const (
	maxRSSAfterMB    = 50
	maxQueueGrowthMB = 200
)

// options are the command-line flags.
type options struct {
	duration   time.Duration
	warmup     time.Duration
	reps       int
	out        string
	queue      int
	queueWait  time.Duration
	profile    bool
	queueHeap  bool
	standard   bool
	gogc       string
	gomemlimit string
	outbound   string
	cluster    bool
	requestLog string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each run (capped at a quarter of -duration)")
	fs.IntVar(&o.reps, "reps", 3, "repetitions of every scenario on each path")
	fs.StringVar(&o.out, "out", "bench-results", "directory for results.md, results.json, logs and profiles")
	fs.IntVar(&o.queue, "queue", 10000, "concurrent requests of the queueing scenario (0 skips it)")
	fs.DurationVar(&o.queueWait, "queue-wait", 120*time.Second, "maxWaitMs of the cap-1 connection (at most 120s)")
	fs.BoolVar(&o.profile, "profile", true, "fetch a CPU profile of Gatehouse during an extra non-streaming c=16 run, if it serves /debug/pprof")
	fs.BoolVar(&o.queueHeap, "queue-heap", false, "take a heap profile of Gatehouse (after a forced GC) with 80% of the queueing scenario queued; the forced GC lowers the RSS peak, so use it to see where memory goes, not to measure growth")
	fs.BoolVar(&o.standard, "standard", true, "run the standard scenarios (false: only the queueing scenario, for iterating on memory)")
	fs.StringVar(&o.gogc, "gogc", "400", "GOGC of Gatehouse and the fake upstream (as in production)")
	fs.StringVar(&o.gomemlimit, "gomemlimit", "512MiB", "GOMEMLIMIT of Gatehouse and the fake upstream (as in production)")
	fs.StringVar(&o.outbound, "outbound", "fasthttp", "Gatehouse's upstream client (GATEHOUSE_OUTBOUND): fasthttp or net/http")
	fs.BoolVar(&o.cluster, "cluster", true, "also run the scenarios with cluster targets through the same build in cluster mode, on a redis-server of its own (needs redis-server)")
	fs.StringVar(&o.requestLog, "request-log", "both", "Gatehouse's request log (GATEHOUSE_REQUEST_LOG): on, off, or both (on, and a second Gatehouse with it off measured beside it where a scenario has a log target)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.outbound != "net/http" && o.outbound != "fasthttp":
		return o, fmt.Errorf("bench: -outbound %q: want net/http or fasthttp", o.outbound)
	case o.requestLog != "on" && o.requestLog != "off" && o.requestLog != "both":
		return o, fmt.Errorf("bench: -request-log %q: want on, off or both", o.requestLog)
	case fs.NArg() > 0:
		return o, fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	case o.duration < 500*time.Millisecond:
		return o, errors.New("bench: -duration must be at least 500ms")
	case o.reps < 1:
		return o, errors.New("bench: -reps must be at least 1")
	case o.queue < 0 || o.queueWait <= 0 || o.queueWait > 120*time.Second:
		return o, errors.New("bench: -queue must not be negative and -queue-wait must be in (0, 120s]")
	}
	o.warmup = min(o.warmup, o.duration/4)
	return o, nil
}

// env is the running benchmark: the children and what is needed to reach them.
type env struct {
	gatehouse, upstream *child
	gatehouseURL        string // http://127.0.0.1:PORT
	upstreamBase        string // http://127.0.0.1:PORT/v1
	// queueUpstream answers after 1 ms, for the queueing scenario: the latency has
	// to be the upstream's own, since Gatehouse forwards no X-Mock-* header.
	queueUpstream       *child
	queueUpstreamBase   string
	apiToken, clientKey string
	upstreamKey         string
	bin                 string // the gatehouse binary, for pprof
	// Cluster mode (-cluster): a second Gatehouse on a redis-server.
	cluster, redis *child
	clusterURL     string
	rdb            *redis.Client
	// -request-log both: a second Gatehouse with the request log off.
	noLog    *child
	noLogURL string
}

// run is the whole harness.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	o, err := parseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// The harness shares the cores with what it measures: keep its own GC quiet.
	debug.SetGCPercent(400)
	nofile, err := raiseFileLimit(uint64(o.queue) + 4096)
	if err != nil {
		return err
	}
	if nofile < uint64(o.queue)+1024 {
		fmt.Fprintf(stderr, "bench: warning: open-file limit is %d, too low for %d concurrent connections\n", nofile, o.queue)
	}

	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	out := o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("bench: output dir: %w", err)
	}
	tmp, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return fmt.Errorf("bench: temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Reachable by the postgres system user, so the managed cluster lives in the
	// data dir below (and goes away with it) rather than under /var/lib/gatehouse.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("bench: temp dir: %w", err)
	}

	rep := &report{
		When: time.Now(), Commit: gitCommit(ctx, root), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		LoadBefore: loadAverage(), Duration: o.duration.String(), Reps: o.reps,
		Smoke:    o.duration < 10*time.Second || o.reps < 3 || !o.standard,
		ChildEnv: []string{"GOGC=" + o.gogc, "GOMEMLIMIT=" + o.gomemlimit},
		Outbound: o.outbound,
	}

	fmt.Fprintf(stderr, "bench: building gatehouse and mockupstream ...\n")
	gatehouseBin, upstreamBin, err := buildBinaries(ctx, root, filepath.Join(tmp, "bin"), stderr)
	if err != nil {
		return err
	}
	e, cleanup, err := start(ctx, o, tmp, out, gatehouseBin, upstreamBin, rep.ChildEnv, stderr)
	defer func() {
		if cerr := cleanup(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err != nil {
		return err
	}

	scenarios := standardScenarios()
	var runs []runRecord
	if !o.standard {
		scenarios = nil
	}
	for r := 1; r <= o.reps; r++ {
		for _, sc := range scenarios {
			// Alternate which path goes first, so slow drift on a shared machine
			// does not always favour the same side.
			for _, path := range runOrder(sc, r, o) {
				rec := e.measure(ctx, sc, path, r, o)
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("bench: interrupted: %w", err)
				}
				fmt.Fprintf(stderr, "bench: rep %d %-28s %-9s %8.0f req/s  p50 %7.3f ms  p99 %7.3f ms  gatehouse CPU %6.1f µs/req  ok %d/%d\n",
					r, sc.name, path, rec.RPS, rec.P50Ms, rec.P99Ms, rec.GatehouseCPUUs, rec.OK, rec.Requests)
				if path == pathCluster {
					fmt.Fprintf(stderr, "bench:       redis %.1f µs/req, %.2f script calls + EXECs/req, %.1f commands/req, redis-server CPU %.1f µs/req\n",
						rec.RedisUs, rec.RedisRoundTrips, rec.RedisCommands, rec.RedisCPUUs)
				}
				runs = append(runs, rec)
			}
		}
	}
	rep.Runs = runs
	for _, sc := range scenarios {
		s := summarize(sc, runs)
		rep.Scenarios = append(rep.Scenarios, s)
		rep.Targets = append(rep.Targets, s.Targets...)
	}
	mem, err := readMem(e.gatehouse.pid())
	if err != nil {
		return err
	}
	rep.RSSAfterMB, rep.PeakRSSMB = megabytes(mem.RSS), megabytes(mem.HWM)
	if o.standard {
		rep.Targets = append(rep.Targets, targetCheck{
			What: "Gatehouse RSS after the standard runs", Want: fmt.Sprintf("≤ %d MB", maxRSSAfterMB),
			Got: fmt.Sprintf("%.1f MB", rep.RSSAfterMB), Pass: rep.RSSAfterMB <= maxRSSAfterMB,
		})
	}

	rep.ProfileNote = "not requested (-profile=false)"
	if o.profile && o.standard {
		rep.ProfileNote, rep.TopCPU = e.profile(ctx, o, out, stderr)
		if o.cluster {
			rep.ClusterProfileNote, rep.ClusterTopCPU = e.profileOf(ctx, o, out, stderr, "gatehouse-cluster", e.clusterURL)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench: interrupted: %w", err)
	}

	if o.queue > 0 {
		fmt.Fprintf(stderr, "bench: queueing scenario: %d concurrent requests on a cap-1 gate ...\n", o.queue)
		api, tr := newClient(4, 10*time.Second)
		defer tr.CloseIdleConnections()
		t := newTarget(e.gatehouseURL+"/v1", e.clientKey, queueModel, false, nil)
		var heap func(context.Context) string
		var heapTop []string
		if o.queueHeap {
			heap = func(ctx context.Context) string {
				// The live heap of the waiters, for go tool pprof -sample_index=inuse_space.
				path := filepath.Join(out, "gatehouse-heap-queued.pprof")
				if err := fetchTo(ctx, e.gatehouseURL+"/debug/pprof/heap?gc=1", e.apiToken, path, 30*time.Second); err != nil {
					return "not taken: " + err.Error()
				}
				if top, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-sample_index=inuse_space", "-top", "-nodecount=12", e.bin, path).CombinedOutput(); err == nil {
					heapTop = topLines(top, 12)
				}
				// The waiters' stacks, to see which frames sit under the wait.
				_ = fetchTo(ctx, e.gatehouseURL+"/debug/pprof/goroutine?debug=2", e.apiToken, filepath.Join(out, "gatehouse-goroutines-queued.txt"), 30*time.Second)
				return path + " (taken with -queue-heap: its forced GC lowered the RSS peak above)"
			}
		}
		q, err := queueBurst(ctx, t, o.queue, o.queueWait+60*time.Second, e.gatehouse.pid(), func(ctx context.Context) (int, error) {
			return gatesQueued(ctx, api, e.gatehouseURL, e.apiToken)
		}, func(ctx context.Context) (runtimeView, error) {
			return scrapeRuntime(ctx, api, e.gatehouseURL, e.apiToken)
		}, heap)
		if err != nil {
			return err
		}
		q.HeapTop = heapTop
		rep.Queue = &q
		rep.Targets = append(rep.Targets,
			targetCheck{
				What: fmt.Sprintf("answers other than 200 or a typed 429 (SEMAPHORE_TIMEOUT) with %d queued", o.queue), Want: "0",
				Got: fmt.Sprint(q.Other), Pass: q.Other == 0 && q.OK+q.Timeout == q.Requests,
			},
			targetCheck{
				What: fmt.Sprintf("Gatehouse extra RSS with %d queued on a cap-1 gate", o.queue), Want: fmt.Sprintf("≤ %d MB", maxQueueGrowthMB),
				Got: fmt.Sprintf("%.1f MB", q.RSSGrowthMB), Pass: q.RSSGrowthMB <= maxQueueGrowthMB,
			})
	}
	rep.LoadAfter = loadAverage()
	return rep.write(out, stdout)
}

// measure runs one scenario on one path after an unmeasured warm-up.
func (e *env) measure(ctx context.Context, sc scenario, path string, rep int, o options) runRecord {
	t := newTarget(e.upstreamBase, e.upstreamKey, benchModel, sc.stream, nil)
	ghPID, upPID := e.gatehouse.pid(), e.upstream.pid()
	switch path {
	case pathGatehouse:
		t = newTarget(e.gatehouseURL+"/v1", e.clientKey, benchModel, sc.stream, nil)
	case pathCluster:
		t = newTarget(e.clusterURL+"/v1", e.clientKey, benchModel, sc.stream, nil)
		ghPID = e.cluster.pid()
	case pathNoLog:
		t = newTarget(e.noLogURL+"/v1", e.clientKey, benchModel, sc.stream, nil)
		ghPID = e.noLog.pid()
	}
	if o.warmup > 0 {
		closedLoop(ctx, t, sc.conc, o.warmup, nil)
	}
	probes := []cpuProbe{
		{name: pathGatehouse, read: func() time.Duration { d, _ := processCPU(ghPID); return d }},
		{name: "postgres", read: func() time.Duration { return descendantsCPU(ghPID) }},
		{name: "upstream", read: func() time.Duration { d, _ := processCPU(upPID); return d }},
		{name: "harness", read: selfCPU},
	}
	if path == pathNoLog {
		logPID := e.gatehouse.pid()
		probes = append(probes, cpuProbe{name: "postgres-log", read: func() time.Duration { return descendantsCPU(logPID) }})
	}
	var before map[string]cmdStat
	if path == pathCluster {
		rsPID := e.redis.pid()
		probes = append(probes, cpuProbe{name: "redis", read: func() time.Duration { d, _ := processCPU(rsPID); return d }})
		before = e.redisStats(ctx)
	}
	res := closedLoop(ctx, t, sc.conc, o.duration, probes)
	m := res.metrics
	ok := m.StatusCodes["200"]
	perReq := func(name string) float64 {
		if m.Requests == 0 {
			return 0
		}
		return float64(res.cpu[name]) / float64(time.Microsecond) / float64(m.Requests)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rec := runRecord{
		Scenario: sc.name, Path: path, Rep: rep, Concurrency: sc.conc, Stream: sc.stream,
		Requests: m.Requests, OK: ok, P50Ms: ms(m.Latencies.P50), P99Ms: ms(m.Latencies.P99),
		ElapsedS:       res.elapsed.Seconds(),
		GatehouseCPUUs: perReq(pathGatehouse), PostgresCPUUs: perReq("postgres"),
		UpstreamCPUUs: perReq("upstream"), HarnessCPUUs: perReq("harness"),
		LogPostgresCPUUs: perReq("postgres-log"),
	}
	if span := (m.Duration + m.Wait).Seconds(); span > 0 {
		rec.RPS = float64(ok) / span
	}
	if len(m.Errors) > 0 {
		rec.Errors = m.Errors[:min(len(m.Errors), 5)]
	}
	if path == pathCluster {
		c := costOf(before, e.redisStats(ctx), m.Requests)
		rec.RedisUs, rec.RedisRoundTrips, rec.RedisCommands, rec.RedisMix = c.Us, c.RoundTrips, c.Commands, c.Mix
		rec.RedisCPUUs = perReq("redis")
	}
	return rec
}

// removeOutsideCluster deletes the managed Postgres cluster of dataDir when
// pglocal put it outside the data dir (under /var/lib/gatehouse, because the
// postgres user could not reach tmp): it was created for this run only.
func removeOutsideCluster(dataDir, tmp string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "cluster-location"))
	if err != nil {
		return nil // no cluster, or it lives in the data dir
	}
	loc := strings.TrimSpace(string(b))
	if !filepath.IsAbs(loc) || strings.HasPrefix(loc, tmp+string(filepath.Separator)) {
		return nil
	}
	if err := os.RemoveAll(loc); err != nil {
		return fmt.Errorf("bench: remove throwaway cluster %s: %w", loc, err)
	}
	return nil
}

// gitCommit describes HEAD, with "-dirty" when the tree has changes.
func gitCommit(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD")
	cmd.Dir = root
	head, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(head))
	st := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no")
	st.Dir = root
	if changes, err := st.Output(); err == nil && len(strings.TrimSpace(string(changes))) > 0 {
		c += "-dirty"
	}
	return c
}

// secret returns a random 26-character secret (130 bits).
func secret() string { return rand.Text() }
